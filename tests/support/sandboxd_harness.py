"""A real sandboxd daemon in a subprocess on a real Unix socket, for end-to-end tests."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import (
    LABEL_MANAGED,
    LABEL_OWNER_PROCESS,
    LABEL_SESSION,
    LABEL_STATE,
)
from sandboxd.docker.scratch import remove_volumes, volumes_in
from sandboxd.docker.supervisor_client import RunMessage, SupervisorChannel
from sandboxd.server.state_dir import ID_FILE
from sandboxd.sessions.caps import SessionCaps
from tests.support.parts import SANDBOX_IMAGE, require
from tests.support.processes import log_text, start_logged, stop_server, wait_started

REPO = Path(__file__).resolve().parents[2]
TEST_MAX_SESSIONS = 64


def python_for_others() -> tuple[str, dict[str, str]] | None:
    """An interpreter another (non-root) user can execute, with the env that lets it import
    this checkout and its dependencies; None when there is none (e.g. the venv's Python
    lives under a private /root)."""
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    env = {"PYTHONPATH": os.pathsep.join([os.fspath(REPO), site_packages])}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(version), f"/usr/bin/{version}"):
        if candidate and _executable_by_others(Path(os.path.realpath(candidate))):
            return candidate, env
    return None


def _executable_by_others(path: Path) -> bool:
    if not path.is_file() or not os.stat(path).st_mode & 0o001:
        return False
    return all(os.stat(parent).st_mode & 0o001 for parent in path.parents)


_short_dirs: list[Path] = []


def short_dir(prefix: str = "sd") -> Path:
    """A fresh directory with a short path (Unix socket paths must stay under 108 bytes).

    Removed when the test process exits, like pytest's own temporary directories are
    eventually: a test that forgets it must not leave it in /tmp for good.
    """
    if not _short_dirs:
        atexit.register(_remove_short_dirs)
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix=prefix, dir="/tmp")))
    _short_dirs.append(path)
    return path


def owned_short_dir(prefix: str, uid: int, gid: int) -> Path:
    """A short_dir that `uid`:`gid` owns: a mount the sandbox's user may write to."""
    path = short_dir(prefix)
    os.chown(path, uid, gid)
    return path


def _remove_short_dirs() -> None:
    for path in _short_dirs:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Daemon:
    """One `python -m sandboxd serve` process and where it keeps things."""

    proc: subprocess.Popen[bytes]
    root: Path
    socket: Path
    state_dir: Path
    audit_log: Path
    log: Path
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, timeout: float = 120.0) -> httpx.Client:
        client = httpx.Client(
            transport=httpx.HTTPTransport(uds=os.fspath(self.socket)),
            base_url="http://sandboxd",
            timeout=timeout,
        )
        self.clients.append(client)
        return client

    def output(self) -> str:
        return log_text(self.log)

    def containers(self, docker_client: Any) -> list[Any]:
        """Its sandbox containers: those kept in its state directory (it and the daemons
        before it on that directory made them), running or not."""
        return kept_containers(docker_client, self.state_dir)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send `sig` and wait for the exit status."""
        return stop_server(self.proc, "the daemon", self.output, sig, timeout, self.clients)


def start_daemon(
    root: Path,
    config: str = "",
    *,
    socket_path: Path | None = None,
    user: int | None = None,
    group: int | None = None,
    extra_groups: Sequence[int] | None = None,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
    wait: bool = True,
) -> Daemon:
    """Start a daemon whose state, audit log and socket live under `root`."""
    socket_path = socket_path or root / "sd.sock"
    state_dir = root / "state"
    audit_log = root / "audit.log"
    config_file = root / "sandboxd.toml"
    defaults = {
        "state_dir": f'"{state_dir}"',
        "audit_log": f'"{audit_log}"',
        "shutdown_grace_s": "1",
        # WHY set: a module's daemon keeps its tests' sessions until they idle out, and the
        # caps derived from a small host (as few as 4) are not what those tests are about.
        "max_sessions": str(TEST_MAX_SESSIONS),
        "max_sessions_per_caller": str(TEST_MAX_SESSIONS),
    }
    given = {line.split("=")[0].strip() for line in config.splitlines() if "=" in line}
    lines = [f"{key} = {value}" for key, value in defaults.items() if key not in given]
    config_file.write_text("\n".join(lines) + "\n" + config)
    log = root / f"daemon-{time.monotonic_ns()}.log"
    serve = ["serve", "--socket", str(socket_path), "--config", str(config_file)]
    proc = start_logged(
        [python, "-m", "sandboxd", *serve],
        log=log,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        user=user,
        group=group,
        extra_groups=extra_groups,
    )
    daemon = Daemon(proc, root, socket_path, state_dir, audit_log, log)
    if wait:
        wait_until_serving(daemon)
    return daemon


def run_with_paths(
    daemon: Daemon, command: str, paths: Sequence[tuple[Path | str, bool]], **fields: Any
) -> httpx.Response:
    """The daemon's answer to `POST /v1/run` of `command` with `paths` ((path, read_only)
    each) as its allowed_paths, and any other fields of the request."""
    allowed = [{"path": str(path), "read_only": read_only} for path, read_only in paths]
    with daemon.client() as client:
        return client.post("/v1/run", json={"command": command, "allowed_paths": allowed, **fields})


def wait_until_serving(daemon: Daemon, timeout: float = 60.0) -> None:
    def serving() -> bool:
        if "serving on" in daemon.output():
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(os.fspath(daemon.socket))
                return True
        return False

    wait_started(daemon.proc, "the daemon", daemon.output, serving, timeout)


def temenos_background_answer(job_id: str) -> dict[str, object]:
    """What sandboxd's temenos route `POST /run` answers for a command that went on as job
    `job_id`: temenos's shape, with empty output and a zero exit code."""
    return {"stdout": "", "stderr": "", "exit_code": 0, "job_id": job_id, "status": "background"}


def containers_of(docker_client: Any, pid: int, *, session_prefix: str | None = None) -> list[Any]:
    """Managed containers created by the process `pid` (a daemon, or the backends of this test
    process), and those of the sessions named `session_prefix...` whoever made them."""
    found = []
    # WHY ignore_removed: other daemons on the same engine remove theirs while we list.
    listed = docker_client.containers.list(
        all=True, filters={"label": LABEL_MANAGED}, ignore_removed=True
    )
    for container in listed:
        owner = container.labels.get(LABEL_OWNER_PROCESS, "").split("/")
        session = container.labels.get(LABEL_SESSION, "")
        if (len(owner) == 4 and owner[2] == str(pid)) or (
            session_prefix is not None and session.startswith(session_prefix)
        ):
            found.append(container)
    return found


def state_id(state_dir: Path) -> str | None:
    """The id a daemon gave its state directory (sandboxd.server.state_dir), if one did."""
    try:
        return (state_dir / ID_FILE).read_text().strip()
    except FileNotFoundError:
        return None


def kept_containers(docker_client: Any, state_dir: Path) -> list[Any]:
    """The sandboxes kept in `state_dir` (labelled with its id), running or not."""
    kept = state_id(state_dir)
    if kept is None:
        return []
    label = {"label": f"{LABEL_STATE}={kept}"}
    return list(docker_client.containers.list(all=True, filters=label, ignore_removed=True))


def kept_volumes(docker_client: Any, state_dir: Path) -> list[str]:
    """The scratch volumes of the sandboxes kept in `state_dir`."""
    kept = state_id(state_dir)
    if kept is None:
        return []
    label = {"label": f"{LABEL_STATE}={kept}"}
    return sorted(v["Name"] for v in docker_client.api.volumes(filters=label)["Volumes"] or [])


def remove_kept(docker_client: Any, state_dir: Path) -> None:
    """Remove what the daemons of `state_dir` kept (a test's own, whatever it left)."""
    for container in kept_containers(docker_client, state_dir):
        with contextlib.suppress(Exception):
            remove_with_volumes(container)
    remove_volumes(docker_client.api, kept_volumes(docker_client, state_dir))


def remove_with_volumes(container: Any) -> None:
    """Remove a sandbox container and its scratch volumes (the engine keeps named ones)."""
    container.remove(force=True)
    remove_volumes(container.client.api, volumes_in(container.labels).values())


def removing_test_containers(session_prefix: str | None = None) -> Any:
    """A test module's fixture (assign it to a name in the module): once its tests ran, the
    containers its own backends left behind are removed, and those of the sessions named
    `session_prefix...` (orphans a test made in another owner's name)."""

    @pytest.fixture(scope="module", autouse=True)
    def remove_test_containers(docker_client: Any) -> Iterator[None]:
        yield
        for container in containers_of(docker_client, os.getpid(), session_prefix=session_prefix):
            remove_with_volumes(container)

    return remove_test_containers


def docker_backend(state_dir: Path, *, sessions: int, **options: Any) -> DockerBackend:
    """A DockerBackend on the sandbox image (use it with `async with`), its session caps set
    rather than derived: a small host's (as few as 4) are not what backend tests are about."""
    caps = SessionCaps(total=sessions, per_caller=sessions, basis="set by the tests")
    return DockerBackend(image=SANDBOX_IMAGE, state_dir=state_dir, session_caps=caps, **options)


@contextlib.contextmanager
def running_daemon(docker_client: Any, config: str = "", **options: Any) -> Iterator[Daemon]:
    """A daemon for the duration of a test; its containers are removed whatever happens."""
    root = short_dir()
    if options.get("user") is not None:
        os.chown(root, options["user"], options.get("group") or -1)
    daemon = start_daemon(root, config, **options)
    try:
        yield daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()
        for container in containers_of(docker_client, daemon.proc.pid):
            with contextlib.suppress(Exception):
                remove_with_volumes(container)
        remove_kept(docker_client, daemon.state_dir)
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class OtherUser:
    """A non-root user the tests run programs as: its uid (and same-numbered gid), its home,
    and a Python it may execute with the env that imports this checkout."""

    uid: int
    home: Path
    python: str
    python_env: dict[str, str]

    def sandboxd(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`python -m sandboxd ARGS` as this user, in no group but its own: a caller the
        daemon knows by its peer credentials only."""
        return subprocess.run(
            [self.python, "-m", "sandboxd", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            user=self.uid,
            group=self.uid,
            extra_groups=[],
            env={**os.environ, "HOME": str(self.home), **self.python_env},
        )


@contextlib.contextmanager
def running_daemon_as(
    docker_client: Any, uid: int, config: str = ""
) -> Iterator[tuple[Daemon, OtherUser]]:
    """A daemon deployed as the README says: run by a non-root user (`uid`, its own group) who
    is a member of the docker group and has a home of its own."""
    require(os.getuid() == 0, "switching to another user needs root")
    found = python_for_others()
    require(found is not None, "no Python interpreter that a non-root user may execute")
    assert found is not None
    python, python_env = found
    root = short_dir()
    os.chown(root, uid, uid)
    home = root / "home"
    home.mkdir()
    os.chown(home, uid, uid)
    user = OtherUser(uid, home, python, python_env)
    try:
        with running_daemon(
            docker_client,
            config,
            socket_path=root / "sd.sock",
            user=uid,
            group=uid,
            extra_groups=[os.stat("/var/run/docker.sock").st_gid],
            env={"HOME": str(home), **python_env},
            python=python,
        ) as daemon:
            yield daemon, user
    finally:
        shutil.rmtree(root, ignore_errors=True)


def true_message(channel: SupervisorChannel, **fields: Any) -> RunMessage:
    """A run of `true` for a supervisor's channel, small limits; `fields` change any."""
    defaults: dict[str, Any] = {
        "command": "true",
        "env": {},
        "cwd": "/",
        "timeout_s": 5,
        "max_output_bytes": 1024,
        "max_saved_output_bytes": 0,
    }
    return RunMessage(id=channel.next_id(), **{**defaults, **fields})


def answered_late(create: Callable[..., str], made: threading.Event) -> Callable[..., str]:
    """`create` (a container-making call of sandboxd.docker) answering half a second after
    its container exists, `made` set then: a test cancels the caller meanwhile."""

    def late(api: Any, **options: Any) -> str:
        container_id = create(api, **options)
        made.set()
        time.sleep(0.5)
        return container_id

    return late
