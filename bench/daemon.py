"""A real sandboxd daemon for one benchmark family, and the Docker bits around it."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.processes import stop_process
from sandboxd.docker.container import SUPERVISOR_MODULE
from sandboxd.docker.ownership import LABEL_MANAGED, LABEL_SESSION, LABEL_STATE
from sandboxd.docker.scratch import remove_volumes
from sandboxd.server.daemon import REMOVE_SIGNAL
from sandboxd.server.state_dir import ID_FILE

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


class BenchSetupError(Exception):
    """A benchmark cannot run here; the message says what is missing and what to do."""


@dataclass(frozen=True)
class BenchDaemon:
    """A running `python -m sandboxd serve` and where it keeps things."""

    pid: int
    socket: Path
    log: Path

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def docker_client() -> Any:
    """A docker-py client for a live engine that has the sandbox image, or a clear error."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure means the same thing here: no usable engine
        raise BenchSetupError(
            f"no Docker engine answers ({exc}): start it, e.g. with ./scripts/setup-docker"
        ) from exc
    return client


def require_image(client: Any, image: str) -> None:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise BenchSetupError(
            f"image {image} is missing: build it with ./scripts/setup-docker "
            "(or `sandboxd build-image`)"
        ) from None


def check_image(image: str) -> None:
    """`require_image` for a family that needs no Docker client of its own."""
    client = docker_client()
    try:
        require_image(client, image)
    finally:
        client.close()


@contextlib.contextmanager
def running_daemon(image: str, config_extra: str = "") -> Iterator[BenchDaemon]:
    """Start a daemon on a private socket; stop it and remove its containers afterwards.

    `config_extra`: TOML appended to the daemon's config (after its top-level keys).
    """
    root = daemon_root(image, config_extra)
    try:
        proc, daemon = spawn_daemon(root)
        try:
            yield daemon
        finally:
            stop_daemon(proc, daemon)
    finally:
        remove_leftovers(root)
        shutil.rmtree(root, ignore_errors=True)


def daemon_root(image: str, config_extra: str = "") -> Path:
    """A directory for a daemon's socket, config, state and logs (one daemon at a time, or
    one after another: each restart finds the state its predecessor left)."""
    # WHY /tmp and a short prefix: Unix socket paths must stay under 108 bytes, and the
    # daemon's per-container sockets live under its state directory.
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="lb", dir="/tmp")))
    (root / "sandboxd.toml").write_text(
        f'image = "{image}"\n'
        f'state_dir = "{root / "state"}"\n'
        f'audit_log = "{root / "audit.log"}"\n'
        "shutdown_grace_s = 1\n" + config_extra
    )
    return root


def spawn_daemon(root: Path) -> tuple[subprocess.Popen[bytes], BenchDaemon]:
    """`sandboxd serve` on `root`'s socket and config, once it listens."""
    sock = root / "sd.sock"
    log = root / f"daemon-{time.monotonic_ns()}.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "sandboxd", "serve"),
                *("--socket", str(sock), "--config", str(root / "sandboxd.toml")),
                *("--log-level", "WARNING"),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    daemon = BenchDaemon(proc.pid, sock, log)
    try:
        _wait_until_serving(proc, daemon)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, daemon


def session_container(client: Any, session: str) -> Any:
    """The container the daemon started for our `session` (it prefixes the caller's uid)."""
    found = client.containers.list(
        filters={"label": [LABEL_MANAGED, f"{LABEL_SESSION}=u{os.getuid()}-{session}"]},
        ignore_removed=True,
    )
    if len(found) != 1:
        raise BenchSetupError(
            f"expected one running container for session {session}, found {len(found)}: "
            "has the daemon's container labelling changed?"
        )
    return found[0]


def supervisor_pid(container: Any) -> int:
    """The host pid of the in-container supervisor (the process that captures output)."""
    top = container.top(ps_args="-eo pid,comm,args")
    for pid, name, args in top["Processes"]:
        # The init process's arguments name the supervisor too: match the python process.
        if name.startswith("python") and f"-m {SUPERVISOR_MODULE}" in args:
            return int(pid)
    raise BenchSetupError(
        f"no supervisor process in container {container.name}: the image has no python3, "
        "so the daemon fell back to `docker exec`"
    )


def _wait_until_serving(proc: subprocess.Popen[bytes], daemon: BenchDaemon) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchSetupError(
                f"sandboxd exited with status {proc.returncode} on start-up:\n{daemon.log_tail()}"
            )
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(daemon.socket))
            return
        time.sleep(0.05)
    raise BenchSetupError(
        f"sandboxd did not listen within {START_TIMEOUT_S:g} s:\n{daemon.log_tail()}"
    )


def stop_daemon(proc: subprocess.Popen[bytes], daemon: BenchDaemon) -> None:
    """Stopped with its sandboxes removed (`sandboxd stop --remove-sandboxes`): a plain stop
    would leave them to a next daemon."""
    if not stop_process(proc, STOP_TIMEOUT_S, REMOVE_SIGNAL):
        raise BenchSetupError(
            f"sandboxd did not stop within {STOP_TIMEOUT_S:g} s of {REMOVE_SIGNAL.name}:\n"
            f"{daemon.log_tail()}"
        )


def kept_id(root: Path) -> str | None:
    """The id the daemons of `root` gave its state directory (their sandboxes' label)."""
    try:
        return (root / "state" / ID_FILE).read_text().strip()
    except OSError:
        return None


def remove_leftovers(root: Path) -> None:
    """What the daemons of `root` left, killed or stopped, with the scratch volumes (a stop
    with --remove-sandboxes removes them itself)."""
    kept = kept_id(root)
    if kept is None:
        return
    with contextlib.suppress(BenchSetupError):
        client = docker_client()
        label = {"label": f"{LABEL_STATE}={kept}"}
        # WHY ignore_removed: other daemons on the same engine remove theirs while we list.
        for container in client.containers.list(all=True, filters=label, ignore_removed=True):
            with contextlib.suppress(Exception):
                container.remove(force=True)
        names = [v["Name"] for v in client.api.volumes(filters=label)["Volumes"] or []]
        remove_volumes(client.api, names)
        client.close()
