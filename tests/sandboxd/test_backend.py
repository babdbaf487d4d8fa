"""DockerBackend against the real Docker engine and the real sandbox image."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import shutil
import signal
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from logos.options import NONINTERACTIVE_ENV
from logos.result import Result
from logos.runners.capture import SAVE_LIMIT_NOTE
from sandboxd.backend import (
    BackendError,
    ExecRequest,
    ImageMissingError,
    Limits,
    Mount,
    SandboxSpec,
    SessionLostError,
)
from sandboxd.docker import backend as backend_module
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import LABEL_MANAGED, LABEL_OWNER, LABEL_SESSION
from tests.support.processes import killed_after_printing
from tests.support.sandboxd_harness import (
    answered_late,
    docker_backend,
    owned_short_dir,
    removing_test_containers,
    short_dir,
)

SANDBOX_IMAGE = os.environ.get("SANDBOXD_IMAGE", "logos-sandbox:latest")
UID = GID = 1000

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


remove_our_containers = removing_test_containers(session_prefix="orphan-test")


@pytest.fixture
def state_dir() -> Path:
    return short_dir("sbx-")  # sandbox sockets live under it


@pytest.fixture
def host_dir() -> Path:
    """A host directory the sandbox user (1000:1000) owns."""
    return owned_short_dir("sbx-host-", UID, GID)


@pytest.fixture
async def backend(state_dir: Path) -> AsyncIterator[DockerBackend]:
    async with docker_backend(state_dir, sessions=64) as started:
        yield started


def spec(
    *mounts: Mount,
    network: bool = False,
    limits: Limits | None = None,
    image: str = SANDBOX_IMAGE,
    unix_sockets: bool = False,
) -> SandboxSpec:
    return SandboxSpec(
        image=image,
        mounts=mounts,
        network=network,
        uid=UID,
        gid=GID,
        limits=limits or Limits(),
        unix_sockets=unix_sockets,
    )


async def run(
    backend: DockerBackend,
    command: str,
    *,
    session: str = "test",
    sandbox: SandboxSpec | None = None,
    **request: Any,
) -> Result:
    outcome = await backend.run(session, sandbox or spec(), ExecRequest(command, **request))
    return outcome.result


def container_names(docker_client: Any, session: str) -> list[str]:
    return [
        container.name
        for container in docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_SESSION}={session}"}, ignore_removed=True
        )
    ]


@pytest.mark.parametrize("exec_fallback", [False, True], ids=["supervised", "docker-exec"])
async def test_commands_get_the_noninteractive_environment_under_the_requests(
    backend: DockerBackend, busybox_image: str, exec_fallback: bool
) -> None:
    """The same environment as a local command (logos.options), whichever way it runs."""
    box = spec(image=busybox_image, unix_sockets=True) if exec_fallback else spec()
    names = [*NONINTERACTIVE_ENV, "TMPDIR"]
    result = await run(
        backend,
        "; ".join(f'echo "{name}=${name}"' for name in names),
        session=f"env-{exec_fallback}",
        sandbox=box,
        env={"TERM": "xterm"},
    )
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen == {**NONINTERACTIVE_ENV, "TERM": "xterm", "TMPDIR": "/tmp"}, result


async def test_read_only_mount_refuses_writes(backend: DockerBackend, host_dir: Path) -> None:
    (host_dir / "given.txt").write_text("from the host\n")
    result = await run(
        backend,
        f"cat given.txt && touch {host_dir}/new.txt",
        sandbox=spec(Mount.of(str(host_dir), read_only=True)),
    )
    assert result.stdout == "from the host\n"
    assert result.exit_code != 0 and "Read-only file system" in result.stderr
    assert not (host_dir / "new.txt").exists()


async def test_read_write_mount_writes_as_the_caller(
    backend: DockerBackend, host_dir: Path
) -> None:
    result = await run(
        backend, "echo written > out.txt", sandbox=spec(Mount.of(str(host_dir), read_only=False))
    )
    assert result.ok, result
    written = host_dir / "out.txt"
    assert written.read_text() == "written\n"
    assert (written.stat().st_uid, written.stat().st_gid) == (UID, GID)


async def test_rootfs_is_read_only_and_scratch_places_are_writable(
    backend: DockerBackend,
) -> None:
    result = await run(
        backend, 'touch /usr/x 2>&1; touch /tmp/x "$HOME/x" && echo ok; cd && pwd; ulimit -c'
    )
    assert "Read-only file system" in result.stdout
    assert result.stdout.endswith("ok\n/home/sandbox\n0\n")


async def test_network_is_off_unless_asked(backend: DockerBackend, docker_client: Any) -> None:
    ipam = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
    probe = textwrap.dedent(
        f"""\
        ls /sys/class/net
        python3 - <<'EOF'
        import socket
        try:
            socket.create_connection(("{gateway}", 9), timeout=3)
            print("connected")
        except OSError as exc:
            print(type(exc).__name__, exc.errno)
        EOF
        """
    )
    offline = await run(backend, probe, session="net")
    assert offline.stdout.splitlines()[0:1] == ["lo"], offline
    assert offline.stdout.splitlines()[1] == "OSError 101"  # ENETUNREACH: no route at all
    online = await backend.run("net", spec(network=True), ExecRequest(probe))
    assert "eth0" in online.result.stdout.splitlines()
    assert "101" not in online.result.stdout.splitlines()[-1]
    assert len(container_names(docker_client, "net")) == 2  # a different spec, another container


async def test_a_sandbox_without_network_still_reaches_itself_by_name(
    backend: DockerBackend, docker_client: Any
) -> None:
    # Its engine networking is off (no network sandbox of the engine's): the runtime's own
    # namespace holds a loopback that is up, and the sandbox's /etc/hosts names it.
    probe = textwrap.dedent(
        """\
        python3 - <<'EOF'
        import socket
        for name in ("localhost", "sandbox"):
            found = {info[4][0] for info in socket.getaddrinfo(name, 80)}
            print(name, " ".join(sorted(found)))
        for family, name in ((socket.AF_INET, "localhost"), (socket.AF_INET6, "::1")):
            server = socket.socket(family)
            server.bind((name, 0))
            server.listen()
            with socket.create_connection((name, server.getsockname()[1]), timeout=3):
                print("reached", name)
        EOF
        echo x >> /etc/hosts
        """
    )
    result = await run(backend, probe, session="loopback")
    lines = result.stdout.splitlines()
    assert lines == [
        "localhost 127.0.0.1 ::1",
        "sandbox 127.0.1.1",
        "reached localhost",
        "reached ::1",
    ], result
    assert "Permission denied" in result.stderr or "Read-only" in result.stderr, result
    (container,) = container_names(docker_client, "loopback")
    attrs = docker_client.containers.get(container).attrs
    assert attrs["Config"].get("NetworkDisabled") is True
    assert attrs["HostConfig"]["NetworkMode"] == "none"


async def test_sandboxes_without_network_cannot_reach_each_others_loopback(
    backend: DockerBackend,
) -> None:
    # Each has a network namespace of its own: a server on one's loopback (a TCP port, an
    # abstract Unix socket: sockets allowed, as a request may ask) is out of another's reach.
    sockets = spec(unix_sockets=True)
    listen = textwrap.dedent(
        """\
        python3 - <<'EOF'
        import socket, time
        tcp = socket.socket()
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 47123))
        tcp.listen()
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\\0sandboxd-neighbour")
        abstract.listen()
        print("listening", flush=True)
        time.sleep(6)
        EOF
        """
    )
    reach = textwrap.dedent(
        """\
        python3 - <<'EOF'
        import socket
        for family, address in (
            (socket.AF_INET, ("127.0.0.1", 47123)),
            (socket.AF_UNIX, "\\0sandboxd-neighbour"),
        ):
            try:
                socket.socket(family).connect(address)
                print("reached")
            except OSError as exc:
                print(type(exc).__name__)
        EOF
        """
    )
    results: dict[str, Result] = {}

    async def listener() -> None:
        results["listener"] = await run(backend, listen, session="neighbour-a", sandbox=sockets)

    async with anyio.create_task_group() as group:
        group.start_soon(listener)
        await run(backend, "true", session="neighbour-b", sandbox=sockets)  # while a listens
        await anyio.sleep(2)
        results["reach"] = await run(backend, reach, session="neighbour-b", sandbox=sockets)
    assert results["listener"].stdout == "listening\n", results["listener"].stderr
    assert results["reach"].stdout == "ConnectionRefusedError\nConnectionRefusedError\n", results


async def test_warm_commands_reuse_the_container(backend: DockerBackend) -> None:
    first = await backend.run("warm", spec(), ExecRequest("echo one > /tmp/state"))
    second = await backend.run("warm", spec(), ExecRequest("cat /tmp/state"))
    assert first.sandbox == second.sandbox and first.sandbox.startswith("sandboxd-warm-")
    assert second.result.stdout == "one\n"
    other = await backend.run("other", spec(), ExecRequest("cat /tmp/state"))
    assert other.sandbox != first.sandbox and other.result.exit_code != 0


async def test_sandboxes_load_the_supervisor_compiled_once_even_after_a_cleanup(
    backend: DockerBackend, state_dir: Path
) -> None:
    # The container's Python loads the supervisor from the bytecode beside it (-v says so).
    script = (
        "cd /.sandboxd && python3 -E -s -S -v -c 'import supervisor' 2>&1 "
        "| grep -o 'code object from .*supervisor.*'"
    )
    for session in ("compiled", "restaged"):
        outcome = await backend.run(session, spec(), ExecRequest(script))
        assert outcome.result.exit_code == 0, outcome.result
        loaded = outcome.result.stdout.strip().removeprefix("code object from ").strip("'")
        assert loaded.startswith("/.sandboxd/__pycache__/supervisor."), loaded
        name = Path(loaded).name
        control = state_dir / "run" / outcome.sandbox.rsplit("-", 1)[-1]
        staged = state_dir / "supervisor" / "__pycache__" / name
        assert (control / "__pycache__" / name).stat().st_ino == staged.stat().st_ino  # linked
        # A cleaner that empties the state dir must not break the next sandbox.
        shutil.rmtree(state_dir / "supervisor")


async def test_fork_bomb_is_contained(backend: DockerBackend) -> None:
    bounded = spec(limits=Limits(pids=64))
    first = await backend.run("bomb", bounded, ExecRequest("echo ready"))
    foreground = await run(
        backend, "bomb() { bomb | bomb; }; bomb", session="bomb", sandbox=bounded, timeout_s=3
    )
    assert foreground.timed_out
    after = await backend.run("bomb", bounded, ExecRequest("echo alive"))
    assert after.result.stdout == "alive\n", after
    # The classic one returns at once and leaves the container saturated: the next command
    # still runs (the bomb's leftovers are killed to make room).
    await run(backend, ":(){ :|:& };:", session="bomb", sandbox=bounded, timeout_s=3)
    await anyio.sleep(1)
    again = await backend.run("bomb", bounded, ExecRequest("echo alive; ps -e | wc -l"))
    assert again.result.stdout.startswith("alive\n"), again
    assert first.sandbox == after.sandbox == again.sandbox


async def test_memory_bomb_is_oom_killed(backend: DockerBackend) -> None:
    small = spec(limits=Limits(memory=64 * 1024**2))
    result = await run(backend, "python3 -c \"x = b'a' * (400 * 1024**2)\"", sandbox=small)
    assert result.oom_killed and result.signal == signal.SIGKILL, result
    after = await run(backend, "echo survived", sandbox=small)
    assert after.stdout == "survived\n"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def test_output_flood_is_bounded_and_saved(backend: DockerBackend) -> None:
    await run(backend, "true")
    before = rss_bytes()
    total = 100 * 1024**2
    result = await run(
        backend,
        f"yes | head -c {total}",
        max_output_bytes=4096,
        max_saved_output_bytes=1024**2,
        timeout_s=60,
    )
    grown = rss_bytes() - before
    assert result.exit_code == 0 and result.stdout_dropped_bytes > total - 8192
    assert grown < 32 * 1024**2, f"the backend grew by {grown} bytes for a 100 MiB flood"
    assert result.stdout_file is not None and result.stdout_file.startswith("/tmp/logos-output-")
    saved = await run(
        backend, f"head -c {1024**2} {result.stdout_file} | wc -c; tail -n 1 {result.stdout_file}"
    )
    unsaved = total - 1024**2
    assert (
        saved.stdout == f"{1024**2}\n" + SAVE_LIMIT_NOTE.format(unsaved=unsaved, saved=1024**2)[1:]
    )
    peak = await run(backend, "grep VmHWM /proc/$(pgrep -x python3)/status")
    supervisor_peak_kib = int(peak.stdout.split()[1])
    assert supervisor_peak_kib < 64 * 1024, peak.stdout


async def test_timeout_kills_background_jobs_too(backend: DockerBackend) -> None:
    started = time.monotonic()
    result = await run(backend, "sleep 1037 & sleep 60", timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 15
    await anyio.sleep(0.3)
    listing = await run(backend, "ps -eo args")
    assert "sleep 1037" not in listing.stdout and "sleep 60" not in listing.stdout


async def test_background_job_holding_stdout_does_not_block(backend: DockerBackend) -> None:
    started = time.monotonic()
    result = await run(backend, "sleep 1000 & echo hi")
    assert result.stdout == "hi\n" and result.exit_code == 0
    assert time.monotonic() - started < 10


async def test_missing_workdir_is_a_result_error(backend: DockerBackend) -> None:
    result = await run(backend, "true", workdir="/no/such/dir")
    assert result.error is not None and "/no/such/dir does not exist" in result.error


@pytest.mark.timeout(240)
async def test_32_concurrent_commands_across_8_sessions(backend: DockerBackend) -> None:
    results: dict[tuple[int, int], Result] = {}

    async def one(session: int, index: int) -> None:
        results[session, index] = await run(
            backend, f"sleep 0.2; echo {session}-{index}", session=f"many-{session}"
        )

    async with anyio.create_task_group() as tasks:
        for session in range(8):
            for index in range(4):
                tasks.start_soon(one, session, index)
    assert {key: result.stdout for key, result in results.items()} == {
        (session, index): f"{session}-{index}\n" for session in range(8) for index in range(4)
    }
    sessions = await backend.list_sessions()
    assert sorted(info.id for info in sessions) == [f"many-{n}" for n in range(8)]
    assert all(len(info.containers) == 1 and info.running == 0 for info in sessions)


async def test_cancellation_kills_the_command(backend: DockerBackend) -> None:
    await run(backend, "true")
    with anyio.move_on_after(1):
        await run(backend, "sleep 1039")
    await anyio.sleep(0.3)
    listing = await run(backend, "ps -eo args")
    assert "sleep 1039" not in listing.stdout


async def test_a_start_cancelled_while_the_engine_creates_its_container_leaves_none(
    backend: DockerBackend, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine answers the create after the start was cancelled (a client that hung up,
    a daemon stopping): the container it made is removed as the start unwinds, never left
    running where no session knows it."""
    made = threading.Event()
    late = answered_late(backend_module.create_container, made)
    monkeypatch.setattr(backend_module, "create_container", late)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(functools.partial(run, backend, "true", session="cancelled-create"))
        await anyio.to_thread.run_sync(made.wait, 60)
        assert container_names(docker_client, "cancelled-create") != []
        tasks.cancel_scope.cancel()
    assert container_names(docker_client, "cancelled-create") == []
    assert await backend.list_sessions() == []


async def test_close_session_kills_commands_and_removes_containers(
    backend: DockerBackend, docker_client: Any
) -> None:
    await run(backend, "true", session="closing")
    finished: list[Result] = []

    async def long_command() -> None:
        finished.append(await run(backend, "sleep 60", session="closing"))

    started = time.monotonic()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(long_command)
        await anyio.sleep(0.5)
        assert await backend.close_session("closing")
    assert time.monotonic() - started < 30
    assert finished[0].error is not None and "closed" in finished[0].error
    assert container_names(docker_client, "closing") == []
    assert not await backend.close_session("closing")
    assert await backend.list_sessions() == []


async def test_idle_containers_are_removed(state_dir: Path, docker_client: Any) -> None:
    async with DockerBackend(image=SANDBOX_IMAGE, state_dir=state_dir, idle_ttl_s=1) as backend:
        await run(backend, "true", session="idle")
        assert len(container_names(docker_client, "idle")) == 1
        with anyio.fail_after(20):
            while container_names(docker_client, "idle"):
                await anyio.sleep(0.2)
        assert await backend.list_sessions() == []


async def test_aclose_removes_every_container(state_dir: Path, docker_client: Any) -> None:
    async with DockerBackend(image=SANDBOX_IMAGE, state_dir=state_dir) as backend:
        await run(backend, "true", session="shutdown")
    assert container_names(docker_client, "shutdown") == []
    assert list((state_dir / "run").iterdir()) == []


async def test_aclose_also_sweeps_its_untracked_containers(
    state_dir: Path, docker_client: Any
) -> None:
    async with DockerBackend(image=SANDBOX_IMAGE, state_dir=state_dir) as backend:
        # One of ours that no session tracks (e.g. its removal failed while the engine hiccuped).
        stray = docker_client.containers.create(
            SANDBOX_IMAGE,
            "true",
            labels={
                LABEL_MANAGED: "1",
                LABEL_SESSION: "orphan-test-untracked",
                LABEL_OWNER: backend.instance_id,
            },
        )
    assert container_names(docker_client, "orphan-test-untracked") == [], stray.name


async def test_a_command_cannot_kill_the_supervisor(backend: DockerBackend) -> None:
    """It is PID 1 of the container's namespace: no signal from inside reaches it unasked."""
    first = await backend.run("kill", spec(), ExecRequest("sleep 300 & true"))
    killed = await backend.run("kill", spec(), ExecRequest("kill -9 -1; kill -9 1; sleep 0.5"))
    assert killed.result.error is None and killed.result.exit_code == 0, killed.result
    after = await backend.run("kill", spec(), ExecRequest("pgrep -c sleep; echo back"))
    assert after.result.stdout == "0\nback\n" and after.sandbox == first.sandbox


async def test_a_session_whose_supervisor_died_is_lost_until_it_asks_for_a_fresh_sandbox(
    backend: DockerBackend, docker_client: Any
) -> None:
    """Never an empty sandbox under the old name: the session's next command is refused
    with what happened, until its caller asks for a fresh one (and is told again)."""
    first = await backend.run("died", spec(), ExecRequest("echo kept > /tmp/kept"))
    docker_client.containers.get(first.sandbox).kill()
    with contextlib.suppress(SessionLostError):  # sent before the backend saw the channel end
        raced = await backend.run("died", spec(), ExecRequest("cat /tmp/kept"))
        assert raced.sandbox == first.sandbox, raced
        assert raced.result.error is not None and "supervisor" in raced.result.error, raced
    for _ in range(2):  # the same answer until the caller does something about it
        with pytest.raises(SessionLostError, match="killed or removed from outside") as lost:
            await backend.run("died", spec(), ExecRequest("cat /tmp/kept"))
    assert lost.value.code == "session_lost"
    fresh = await backend.start("died", spec(), fresh=True)
    assert fresh.state == "started" and fresh.sandbox != first.sandbox
    assert fresh.notice is not None and "killed or removed from outside" in fresh.notice
    after = await backend.run("died", spec(), ExecRequest("cat /tmp/kept; echo back"))
    assert after.result.stdout == "back\n" and after.sandbox == fresh.sandbox
    assert await backend.close_session("died")


async def test_commands_cannot_reach_the_supervisor(backend: DockerBackend) -> None:
    probe = textwrap.dedent(
        """\
        ls -A /.sandboxd
        touch /.sandboxd/planted 2>&1 | grep -o 'Read-only file system'
        pid=$(pgrep -x python3)
        ls /proc/$pid/fd 2>&1 | grep -o 'Permission denied'
        python3 - <<'EOF'
        import socket
        try:
            socket.socket(socket.AF_UNIX).connect("/.sandboxd/sock")
            print("connected")
        except OSError as exc:
            print(type(exc).__name__)
        EOF
        """
    )
    result = await run(backend, probe)
    assert result.stdout == (
        "__pycache__\nbeat\ncapture.py\negress_forwarder.py\nhosts\nlive.py\nrejoin\nsandbox.json\n"
        "supervisor.py\n"
        "Read-only file system\n"
        "Permission denied\n"
        "PermissionError\n"
    ), result


@pytest.mark.timeout(180)
async def test_orphans_of_a_killed_backend_are_swept(state_dir: Path, docker_client: Any) -> None:
    script = textwrap.dedent(
        f"""\
        import sys, anyio
        from pathlib import Path
        from sandboxd.backend import ExecRequest, SandboxSpec, Limits
        from sandboxd.docker.backend import DockerBackend

        async def main():
            async with DockerBackend(image={SANDBOX_IMAGE!r}, state_dir=Path(sys.argv[1])) as b:
                for session in ("orphan-test-a", "orphan-test-b"):
                    spec = SandboxSpec({SANDBOX_IMAGE!r}, (), False, {UID}, {GID}, Limits())
                    outcome = await b.run(session, spec, ExecRequest("true"))
                    print(outcome.sandbox, flush=True)
                await anyio.sleep(600)

        anyio.run(main)
        """
    )
    names = await killed_after_printing(script, str(state_dir), lines=2)
    assert all(name.startswith("sandboxd-orphan-test-") for name in names), names
    async with DockerBackend(image=SANDBOX_IMAGE, state_dir=state_dir) as live:
        kept = await live.run("live", spec(), ExecRequest("true"))
        async with DockerBackend(image=SANDBOX_IMAGE, state_dir=state_dir) as sweeper:
            assert container_names(docker_client, "orphan-test-a") == []
            assert container_names(docker_client, "orphan-test-b") == []
            for session in ("orphan-test-a", "orphan-test-b"):  # and their scratch volumes
                label = {"label": f"{LABEL_SESSION}={session}"}
                assert not docker_client.api.volumes(filters=label).get("Volumes")
            # A live backend's containers are not orphans, even for another backend.
            assert container_names(docker_client, "live") == [kept.sandbox]
            assert await sweeper.gc() == 0
        assert (await live.run("live", spec(), ExecRequest("echo ok"))).result.stdout == "ok\n"


async def test_health_reports_a_missing_image_with_its_fix(state_dir: Path) -> None:
    missing = "sandboxd-test-missing:never"
    async with DockerBackend(image=missing, state_dir=state_dir) as backend:
        report = await backend.health()
        assert not report.ok and not report.image_present and report.engine_version
        assert report.problems == (f"image {missing} missing: run `sandboxd build-image`",)
        with pytest.raises(ImageMissingError, match="sandboxd build-image"):
            await run(backend, "true", sandbox=spec(image=missing))
        # A failed start leaves nothing behind for its session (a daemon runs for weeks).
        assert backend._sessions._start_locks == {}


async def test_health_of_a_good_setup(backend: DockerBackend) -> None:
    report = await backend.health()
    assert report.ok and report.image_present and report.problems == ()


async def test_image_without_python_falls_back_to_docker_exec(
    backend: DockerBackend, busybox_image: str, host_dir: Path
) -> None:
    mount = Mount.of(str(host_dir), read_only=False)
    # WHY no unix_sockets: the container's profile refuses them to `docker exec` too.
    box = spec(mount, image=busybox_image)
    result = await run(backend, "echo hi > out; cat out; echo err >&2; exit 4", sandbox=box)
    assert (result.stdout, result.stderr, result.exit_code) == ("hi\n", "err\n", 4)
    assert (host_dir / "out").stat().st_uid == UID
    # syslogd makes a Unix socket (/dev/log) first: the profile refuses it to `docker exec` too.
    logged = await run(backend, "timeout 1 syslogd -n -O /tmp/log", sandbox=box)
    assert "socket: Operation not permitted" in logged.stderr, logged
    started = time.monotonic()
    timed = await run(backend, "sleep 1041 & sleep 60", sandbox=box, timeout_s=1)
    assert timed.timed_out and timed.signal == signal.SIGKILL
    assert time.monotonic() - started < 15
    held = await run(backend, "sleep 1043 & echo held", sandbox=box)
    assert held.stdout == "held\n"
    listing = await run(backend, "ps -o args", sandbox=box)
    assert "sleep 1041" not in listing.stdout and "sleep 60" not in listing.stdout
    missing = await run(backend, "true", sandbox=box, workdir="/no/such/dir")
    assert missing.error is not None and "does not exist" in missing.error


async def test_a_state_dir_cleaned_under_the_daemon_is_recreated(
    backend: DockerBackend, state_dir: Path
) -> None:
    shutil.rmtree(state_dir / "run")
    assert await backend.gc() == 0
    result = await run(backend, "echo fresh", session="cleaned")
    assert (result.stdout, result.error) == ("fresh\n", None)
    shutil.rmtree(state_dir / "run")
    (state_dir / "run").write_text("in the way")
    with pytest.raises(BackendError, match="make the daemon's state_dir writable"):
        await run(backend, "true", session="blocked")
    (state_dir / "run").unlink()
