"""Forking a session against the real Docker engine: its copies, its refusals, its API."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from logos.options import ExecOptions
from sandboxd.api import API_PREFIX
from sandboxd.backend import BackendError, ExecRequest, ForkRefusedError, Limits, Mount, SandboxSpec
from sandboxd.client.runner import SandboxForkError, SandboxRunner
from sandboxd.docker import backend as backend_module, fork as fork_module
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.fork import COPIER_ROLE, LABEL_ROLE
from sandboxd.docker.ownership import LABEL_OWNER, LABEL_SESSION
from sandboxd.sessions.pool import CHECK_S, PoolSettings, WarmPool
from tests.support.parts import SANDBOX_IMAGE
from tests.support.processes import open_fds
from tests.support.sandboxd_harness import (
    answered_late,
    docker_backend,
    owned_short_dir,
    removing_test_containers,
    running_daemon,
    short_dir,
)

UID = GID = 1000

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


remove_our_containers = removing_test_containers()


@pytest.fixture
async def backend() -> AsyncIterator[DockerBackend]:
    async with docker_backend(short_dir("sbk-"), sessions=16) as started:
        yield started


@pytest.fixture
def workspace() -> Path:
    return owned_short_dir("sbk-ws-", UID, GID)


def spec(*mounts: Mount) -> SandboxSpec:
    return SandboxSpec(SANDBOX_IMAGE, mounts, False, UID, GID, Limits(memory=256 * 1024**2))


async def sh(backend: DockerBackend, session: str, command: str, box: SandboxSpec) -> str:
    outcome = await backend.run(session, box, ExecRequest(command))
    assert outcome.result.exit_code == 0, outcome.result
    return outcome.result.stdout


async def test_forks_start_from_a_copy_of_tmp_and_home_and_then_go_their_own_ways(
    backend: DockerBackend,
) -> None:
    box = spec()
    prepared = "mkdir -p /tmp/deep/er && echo built > /tmp/deep/er/out && echo rc > ~/.rc"
    await sh(backend, "source", prepared + " && ln -s deep/er /tmp/link", box)
    outcomes = await backend.fork("source", ["f1", "f2"])
    assert [o.state for o in outcomes] == ["started", "started"]
    assert len({o.sandbox for o in outcomes}) == 2
    look = "cat /tmp/link/out ~/.rc; stat -c '%u %a' /tmp/deep ~/.rc; cat /tmp/mine 2>&1; true"
    for fork in ("f1", "f2"):
        seen = await sh(backend, fork, look, box)
        assert seen.splitlines()[:4] == ["built", "rc", "1000 755", "1000 644"], seen
        assert "No such file" in seen
        await sh(backend, fork, f"echo {fork} > /tmp/mine", box)
    assert await sh(backend, "f1", "cat /tmp/mine", box) == "f1\n"
    assert await sh(backend, "f2", "cat /tmp/mine", box) == "f2\n"
    assert "No such file" in await sh(backend, "source", "cat /tmp/mine 2>&1; true", box)


async def test_a_fork_of_an_unknown_busy_or_taken_session_is_refused(
    backend: DockerBackend,
) -> None:
    box = spec()
    with pytest.raises(ForkRefusedError) as unknown:
        await backend.fork("nobody", ["f1"])
    assert (unknown.value.status, unknown.value.code) == (404, "unknown_session")
    await sh(backend, "source", "true", box)
    await sh(backend, "taken", "true", box)
    for into in (["free", "taken"], ["source"]):
        with pytest.raises(ForkRefusedError) as taken:
            await backend.fork("source", into)
        assert (taken.value.status, taken.value.code) == (409, "session_exists")
    assert [info.id for info in await backend.list_sessions()] == ["source", "taken"]
    async with anyio.create_task_group() as group:
        group.start_soon(backend.run, "source", box, ExecRequest("sleep 3"))
        await anyio.sleep(1)
        with pytest.raises(ForkRefusedError) as busy:
            await backend.fork("source", ["f1"])
        assert (busy.value.status, busy.value.code) == (409, "session_busy")
        assert "busy" in str(busy.value)


async def test_a_fork_that_cannot_be_filled_leaves_no_fork_behind(
    backend: DockerBackend,
) -> None:
    box = spec()
    await sh(backend, "source", "echo x > /tmp/unreadable && chmod 000 /tmp/unreadable", box)
    with pytest.raises(BackendError) as failed:
        await backend.fork("source", ["f1", "f2"])
    assert failed.value.code == "fork_failed"
    assert "Permission denied" in str(failed.value) and "none was kept" in str(failed.value)
    assert [info.id for info in await backend.list_sessions()] == ["source"]
    assert (await backend.run("f1", box, ExecRequest("ls /tmp"))).result.stdout == ""


async def test_a_fork_cancelled_while_the_engine_creates_its_copier_leaves_none(
    backend: DockerBackend, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a sandbox's start: a copier the engine made after its fork was cancelled is
    removed, and the source runs on."""
    box = spec()
    await sh(backend, "source", "echo kept > /tmp/kept", box)
    made = threading.Event()
    late = answered_late(backend_module.create_copier, made)
    monkeypatch.setattr(backend_module, "create_copier", late)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(backend.fork, "source", ["f1"])
        await anyio.to_thread.run_sync(made.wait, 60)
        tasks.cancel_scope.cancel()
    with anyio.fail_after(20):  # removed off the fork's answer
        while copiers(docker_client, backend):
            await anyio.sleep(0.1)
    assert await sh(backend, "source", "cat /tmp/kept", box) == "kept\n"


async def test_read_write_mounts_are_shared_by_forks_only_when_asked(
    backend: DockerBackend, workspace: Path
) -> None:
    writable = spec(Mount.of(str(workspace), read_only=False))
    await sh(backend, "source", "echo base > /tmp/state", writable)
    with pytest.raises(ForkRefusedError) as refused:
        await backend.fork("source", ["f1"])
    assert (refused.value.status, refused.value.code) == (409, "writable_mounts")
    assert str(workspace) in str(refused.value) and "share_writable_mounts" in str(refused.value)
    await backend.fork("source", ["f1", "f2"], share_writable_mounts=True)
    for fork in ("f1", "f2"):
        await sh(backend, fork, f"cat /tmp/state > {fork}.txt", writable)
    assert (workspace / "f1.txt").read_text() == (workspace / "f2.txt").read_text() == "base\n"
    read_only = spec(Mount.of(str(workspace), read_only=True))
    await sh(backend, "ro", "echo ro > /tmp/state", read_only)
    await backend.fork("ro", ["ro-fork"])
    assert await sh(backend, "ro-fork", "cat /tmp/state; ls", read_only) == ("ro\nf1.txt\nf2.txt\n")


async def test_forks_take_warm_sandboxes_when_the_pool_has_them() -> None:
    pool = PoolSettings(size=2)
    async with docker_backend(short_dir("sbk-"), sessions=8, pool=pool) as backend:
        box = spec()
        await sh(backend, "other", "true", box)  # a spec asked for again is kept warm
        await sh(backend, "source", "echo warm > /tmp/state", box)
        with anyio.fail_after(60):
            while len(backend._sessions.pool.boxes()) < 2:
                await anyio.sleep(0.05)
        outcomes = await backend.fork("source", ["f1", "f2"])
        assert all(o.sandbox.startswith("sandboxd-pool-") for o in outcomes), outcomes
        assert await sh(backend, "f2", "cat /tmp/state", box) == "warm\n"


def test_the_fork_route_answers_clear_refusals(docker_client: Any) -> None:
    with running_daemon(docker_client, "max_forks = 2\n") as daemon, daemon.client() as http:
        fork = f"{API_PREFIX}/sessions/src/fork"
        unknown = http.post(fork, json={"into": ["a"]})
        assert unknown.status_code == 404, unknown.text
        assert "cannot fork session 'src'" in unknown.json()["error"]["message"]
        ran = http.post(f"{API_PREFIX}/run", json={"session": "src", "command": "echo x > /tmp/x"})
        assert ran.status_code == 200, ran.text
        over = http.post(fork, json={"into": ["a", "b", "c"]})
        assert over.status_code == 422 and "max_forks" in over.json()["error"]["message"]
        assert "at most 2" in over.json()["error"]["message"]
        twice = http.post(fork, json={"into": ["a", "a"]})
        assert twice.status_code == 422 and "twice" in twice.text
        bad_bodies: list[dict[str, object]] = [
            {},
            {"into": []},
            {"into": ["no/slash"]},
            {"into": ["a"], "extra": 1},
        ]
        for bad in bad_bodies:
            assert http.post(fork, json=bad).status_code == 422, bad
        made = http.post(fork, json={"into": ["a", "b"]})
        assert made.status_code == 200, made.text
        assert [f["session"] for f in made.json()["forks"]] == ["a", "b"]
        read = http.post(f"{API_PREFIX}/run", json={"session": "b", "command": "cat /tmp/x"})
        assert read.json()["stdout"] == "x\n"
        again = http.post(fork, json={"into": ["a"]})
        assert again.status_code == 409 and again.json()["error"]["code"] == "session_exists"
        job = {"session": "src", "command": "sleep 30", "background_after_s": 0.2}
        assert http.post(f"{API_PREFIX}/run", json=job).json()["job"], "a job keeps it busy"
        busy = http.post(fork, json={"into": ["c"]})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
        assert "busy" in busy.json()["error"]["message"]


async def test_a_sandbox_runner_forks_into_runners_of_their_own(docker_client: Any) -> None:
    with running_daemon(docker_client) as daemon:
        runner = SandboxRunner(daemon.socket)
        try:
            with pytest.raises(SandboxForkError, match="404 unknown_session"):
                await runner.fork(2)
            assert (await runner.run("echo prepared > /tmp/state", ExecOptions())).ok
            forks = await runner.fork(2)
            try:
                assert len({fork.session for fork in forks} | {runner.session}) == 3
                for fork in forks:
                    seen = await fork.run(
                        f"cat /tmp/state; echo {fork.session} > /tmp/state", ExecOptions()
                    )
                    assert seen.stdout == "prepared\n", seen
                assert (await runner.run("cat /tmp/state", ExecOptions())).stdout == "prepared\n"
            finally:
                for fork in forks:
                    await fork.aclose()
            with daemon.client() as http:
                listed = http.get(f"{API_PREFIX}/sessions").json()["sessions"]
            assert [session["id"] for session in listed] == [runner.session]
        finally:
            await runner.aclose()


# --- the copy itself: what goes through, what it cannot do, what it leaves -----------------


def box_of(backend: DockerBackend, session: str) -> Any:
    (box,) = backend._sessions.sandboxes_of(session)
    return box


async def until_held_as(fds: dict[int, str]) -> None:
    """Until this process holds `fds` again (a removal under way may hold one a moment)."""
    with anyio.move_on_after(10):
        while held_by_us() != fds:
            await anyio.sleep(0.1)
    assert held_by_us() == fds


def held_by_us() -> dict[int, str]:
    """This process's descriptors (what each is), but its sockets: a fork holds FIFOs and
    pipes, no socket, and docker-py pools its connections to the engine, as many as its
    calls ever ran at once (a loaded machine made one more during the fork)."""
    held = {}
    for fd in open_fds():
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor
            held[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return {fd: what for fd, what in held.items() if not what.startswith("socket:")}


async def containers_of(docker_client: Any, *sessions: str) -> list[Any]:
    found = []
    for session in sessions:
        found += docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_SESSION}={session}"}, ignore_removed=True
        )
    return found


LISTING = (
    # Every entry under /tmp and $HOME: name, type, mode, owner, mtime (s), target, size.
    "cd / && find tmp \"${HOME#/}\" -mindepth 1 -printf '%p|%y|%m|%U:%G|%Ts|%l|%s\\0' "
    "| sort -z | od -An -c"
)


async def test_a_fork_copies_odd_names_symlinks_empty_dirs_modes_and_times(
    backend: DockerBackend,
) -> None:
    box = spec()
    prepared = r"""
    set -e
    cd /tmp
    mkdir -p 'with space/empty' 'deep/er/est' -- '-dir'
    printf 1 > 'with space/a file'
    printf 2 > "$(printf 'new\nline')"
    printf 3 > ./--help
    printf 4 > ./-dir/-x
    printf 5 > 'deep/er/est/tab	here'
    ln -s 'with space/a file' link
    ln -s ../../nowhere dangling
    ln -s /etc/hostname absolute
    printf 6 > open && chmod 777 open
    printf 7 > secret && chmod 600 secret
    printf 8 > run.sh && chmod 750 run.sh
    chmod 711 deep/er
    touch -d '2001-02-03 04:05:06' 'with space/a file' ./--help 'with space/empty'
    touch -h -d '2002-03-04 05:06:07' link
    touch -d '2003-04-05 06:07:08' deep
    mkdir -p ~/.config/tool && printf 9 > ~/.config/tool/rc && chmod 640 ~/.config/tool/rc
    """
    await sh(backend, "source", prepared, box)
    assert box_of(backend, "source").channel is not None  # a supervised sandbox
    before = await sh(backend, "source", LISTING, box)
    await backend.fork("source", ["f1"])
    assert await sh(backend, "f1", LISTING, box) == before
    seen = await sh(
        backend,
        "f1",
        "cd /tmp && cat 'with space/a file' \"$(printf 'new\\nline')\" ./--help ./-dir/-x "
        "link ~/.config/tool/rc && echo && stat -c '%a %Y %n' open secret run.sh deep/er "
        "./--help 'with space/empty' && stat -c '%N' link dangling absolute && "
        "ls -A 'with space/empty' | wc -l",
        box,
    )
    assert seen.splitlines() == [
        "123419",
        f"777 {_stamp(await sh(backend, 'source', 'stat -c %Y /tmp/open', box))} open",
        f"600 {_stamp(await sh(backend, 'source', 'stat -c %Y /tmp/secret', box))} secret",
        f"750 {_stamp(await sh(backend, 'source', 'stat -c %Y /tmp/run.sh', box))} run.sh",
        f"711 {_stamp(await sh(backend, 'source', 'stat -c %Y /tmp/deep/er', box))} deep/er",
        "644 981173106 ./--help",
        "755 981173106 with space/empty",
        "'link' -> 'with space/a file'",
        "'dangling' -> '../../nowhere'",
        "'absolute' -> '/etc/hostname'",
        "0",
    ], seen


def _stamp(text: str) -> str:
    return text.strip()


async def test_a_fork_of_a_session_with_many_small_files(backend: DockerBackend) -> None:
    box = spec()
    await sh(
        backend,
        "source",
        "mkdir /tmp/many && cd /tmp/many && for i in $(seq 5000); do echo $i > f$i; done",
        box,
    )
    summary = "ls /tmp/many | wc -l; cat /tmp/many/* | md5sum"
    before = await sh(backend, "source", summary, box)
    assert before.split()[0] == "5000"
    with anyio.fail_after(30):
        await backend.fork("source", ["f1", "f2"])
    for fork in ("f1", "f2"):
        assert await sh(backend, fork, summary, box) == before


@pytest.mark.parametrize("image_fixture", ["dash_exec_image", "busybox_image"])
async def test_a_fork_of_an_image_without_python_is_copied_as_any_other(
    backend: DockerBackend, request: pytest.FixtureRequest, image_fixture: str
) -> None:
    """Its copier runs the daemon's image (the session's has no python3)."""
    image = request.getfixturevalue(image_fixture)
    # WHY unix sockets: an image without python3 cannot have them denied (no supervisor).
    box = SandboxSpec(image, (), False, UID, GID, Limits(memory=256 * 1024**2), unix_sockets=True)
    await sh(
        backend,
        "source",
        "mkdir -p /tmp/d/e && echo tmp > /tmp/d/e/f && echo home > ~/.rc && ln -s d/e /tmp/l",
        box,
    )
    assert box_of(backend, "source").channel is None  # `docker exec` for every command
    outcomes = await backend.fork("source", ["f1", "f2"])
    assert [o.state for o in outcomes] == ["started", "started"]
    for fork in ("f1", "f2"):
        assert await sh(backend, fork, "cat /tmp/l/f ~/.rc", box) == "tmp\nhome\n"


async def test_a_copy_over_its_time_fails_the_fork_in_bounded_time_and_thaws_the_session(
    backend: DockerBackend, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fork_module, "COPY_TIMEOUT_S", 0.5)
    box = spec()
    many = 'mkdir /tmp/m && cd /tmp/m && python3 -c \'for i in range(30000): open(f"f{i}", "w")\''
    await sh(backend, "source", many, box)
    await sh(backend, "bystander", "true", box)
    fds = held_by_us()  # after the engine calls above, whose connections stay pooled
    started = time.monotonic()
    with pytest.raises(BackendError) as failed, anyio.fail_after(30):
        await backend.fork("source", ["f1", "f2"])
    elapsed = time.monotonic() - started
    assert failed.value.code == "fork_failed", failed.value
    assert "took over 0 s" in str(failed.value) and "none was kept" in str(failed.value)
    assert elapsed < 20, elapsed
    assert sorted(info.id for info in await backend.list_sessions()) == ["bystander", "source"]
    assert not docker_client.api.inspect_container(box_of(backend, "source").container_id)["State"][
        "Paused"
    ]
    assert await sh(backend, "source", "ls /tmp/m | wc -l", box) == "30000\n"
    with anyio.fail_after(20):  # removed, if not at once (the copier too)
        while await containers_of(docker_client, "f1", "f2") or copiers(docker_client, backend):
            await anyio.sleep(0.1)
    await until_held_as(fds)


def copiers(docker_client: Any, backend: DockerBackend) -> list[Any]:
    """The copiers `backend` made (other tests' backends make theirs meanwhile)."""
    mine = [f"{LABEL_ROLE}={COPIER_ROLE}", f"{LABEL_OWNER}={backend.instance_id}"]
    return docker_client.containers.list(  # type: ignore[no-any-return]
        all=True, filters={"label": mine}, ignore_removed=True
    )


async def test_a_symlink_into_a_read_only_mount_cannot_make_a_fork_write_there(
    backend: DockerBackend, workspace: Path
) -> None:
    (workspace / "kept").write_text("host\n")
    os.chown(workspace / "kept", UID, GID)
    read_only = spec(Mount.of(str(workspace), read_only=True))
    ro = str(workspace)

    def snapshot() -> dict[str, tuple[int, int, bytes]]:
        return {
            str(path.relative_to(workspace)): (
                path.lstat().st_mode,
                path.lstat().st_mtime_ns,
                path.read_bytes() if path.is_file() and not path.is_symlink() else b"",
            )
            for path in [workspace, *workspace.rglob("*")]
        }

    host_before = snapshot()
    prepared = (
        f"ln -s {ro} /tmp/l && ln -s {ro}/kept /tmp/kept && mkdir /tmp/d && "
        f"ln -s {ro} /tmp/d/inner && echo mine > /tmp/mine && echo rc > ~/.rc && "
        f"ln -s {ro} ~/ws && ls {ro}"
    )
    assert await sh(backend, "source", prepared, read_only) == "kept\n"
    await backend.fork("source", ["f1"])
    seen = await sh(
        backend,
        "f1",
        "readlink /tmp/l /tmp/kept /tmp/d/inner ~/ws; cat /tmp/mine ~/.rc /tmp/kept; "
        "echo x > /tmp/l/new 2>&1 || echo refused",
        read_only,
    )
    assert seen.splitlines()[:7] == [ro, f"{ro}/kept", ro, ro, "mine", "rc", "host"], seen
    assert "refused" in seen
    assert snapshot() == host_before


async def test_the_backend_holds_no_more_descriptors_after_forks_that_worked_or_failed(
    backend: DockerBackend,
) -> None:
    box = spec()
    await sh(backend, "source", "echo x > /tmp/x", box)
    await backend.fork("source", ["warm-up"])  # the engine's connections, made once
    await backend.close_session("warm-up")
    fds = held_by_us()
    for round_ in range(3):
        forks = [f"ok-{round_}-{index}" for index in range(2)]
        await backend.fork("source", forks)
        for name in forks:
            assert await sh(backend, name, "cat /tmp/x", box) == "x\n"
            await backend.close_session(name)
        await sh(backend, "source", "echo y > /tmp/locked && chmod 000 /tmp/locked", box)
        with pytest.raises(BackendError) as failed:
            await backend.fork("source", [f"bad-{round_}-1", f"bad-{round_}-2"])
        assert failed.value.code == "fork_failed"
        await sh(backend, "source", "rm -f /tmp/locked", box)
    assert [info.id for info in await backend.list_sessions()] == ["source"]
    await until_held_as(fds)


async def test_no_warm_fill_starts_while_the_pool_is_held_and_it_catches_up_after() -> None:
    """The pool's scheduling alone, driven with plain callables: a fork holds it while it
    copies (DockerBackend.fork)."""
    box = spec()
    starts: list[SandboxSpec] = []
    started = anyio.Event()

    async def start(asked: SandboxSpec) -> object:
        starts.append(asked)
        started.set()
        return object()

    async def discard(_: object, __: str) -> None:
        pass

    async with anyio.create_task_group() as tasks:
        pool: WarmPool[object] = WarmPool(
            PoolSettings(size=2),
            has_room=lambda _: True,
            start=start,
            discard=discard,
            usable=lambda _: True,
            spawn=lambda *task: tasks.start_soon(*task) and None,
        )
        tasks.start_soon(pool.run)
        with pool.held():
            pool.note(box)
            pool.note(box)  # asked for again: kept warm, once the pool may fill
            with pool.held():
                pass  # an inner hold ending leaves the outer one in force
            with anyio.move_on_after(2 * CHECK_S + 0.5):  # past the pool's periodic check
                await started.wait()
            assert starts == [] and pool.filling == []
        with anyio.fail_after(10):
            while len(pool.boxes()) < 2:
                await anyio.sleep(0.01)
        assert starts == [box, box]
        taken = pool.take(box)
        assert taken is not None
        with pool.held():
            await anyio.sleep(2 * CHECK_S + 0.5)  # the time a fork copies
            assert len(starts) == 2 and len(pool.boxes()) == 1
        with anyio.fail_after(10):
            while len(pool.boxes()) < 2:
                await anyio.sleep(0.01)
        assert len(starts) == 3
        tasks.cancel_scope.cancel()


async def test_the_copy_writes_nothing_where_a_fork_mounts_a_path(
    backend: DockerBackend,
) -> None:
    """The session holds entries where its forks mount host paths (under /tmp, and a
    directory named as one outside it): the forks see their host paths, which the copy left
    untouched, and the rest of the session's /tmp."""
    outside = Path(tempfile.mkdtemp(prefix="sbk-mnt-", dir="/var/tmp"))
    under_tmp = Path(tempfile.mkdtemp(prefix="sbk-mnt-"))
    try:
        for path in (outside, under_tmp):
            os.chown(path, UID, GID)
            (path / "kept.txt").write_text("host\n")
        box = spec()
        members = [str(p) for p in (f"/tmp{outside}", under_tmp)]
        craft = " && ".join(
            [
                *(
                    f"mkdir -p {m} && echo evil > {m}/kept.txt && echo evil > {m}/new"
                    for m in members
                ),
                "echo ok > /tmp/ok",
            ]
        )
        await sh(backend, "source", craft, box)
        theirs = spec(*(Mount.of(str(p), read_only=False) for p in (outside, under_tmp)))
        await backend.fork("source", ["f1"], spec=theirs)
        seen = await sh(
            backend, "f1", f"cat /tmp/ok {under_tmp}/kept.txt {outside}/kept.txt", theirs
        )
        assert seen == "ok\nhost\nhost\n"
        for path in (outside, under_tmp):
            assert sorted(p.name for p in path.iterdir()) == ["kept.txt"]
            assert (path / "kept.txt").read_text() == "host\n"
    finally:
        shutil.rmtree(outside, ignore_errors=True)
        shutil.rmtree(under_tmp, ignore_errors=True)
