"""Forking a session against the real Docker engine: its copies, its refusals, its API."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from logos.options import ExecOptions
from sandboxd.api import API_PREFIX
from sandboxd.backend import BackendError, ExecRequest, ForkRefusedError, Limits, Mount, SandboxSpec
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import LABEL_MANAGED, LABEL_OWNER_PROCESS
from sandboxd.pool import PoolSettings
from sandboxd.runner import SandboxForkError, SandboxRunner
from sandboxd.session_caps import SessionCaps
from tests.support.parts import SANDBOX_IMAGE
from tests.support.sandboxd_harness import running_daemon

UID = GID = 1000

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture(scope="module", autouse=True)
def remove_our_containers(docker_client: Any) -> Iterator[None]:
    yield
    for container in docker_client.containers.list(
        all=True, filters={"label": LABEL_MANAGED}, ignore_removed=True
    ):
        if container.labels.get(LABEL_OWNER_PROCESS, "").split("/")[2:3] == [str(os.getpid())]:
            container.remove(force=True)


@pytest.fixture
async def backend() -> AsyncIterator[DockerBackend]:
    state_dir = Path(tempfile.mkdtemp(prefix="sbk-"))
    caps = SessionCaps(total=16, per_caller=16, basis="set by the tests")
    try:
        async with DockerBackend(
            image=SANDBOX_IMAGE, state_dir=state_dir, session_caps=caps
        ) as started:
            yield started
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def workspace() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sbk-ws-"))
    os.chown(path, UID, GID)
    yield path
    shutil.rmtree(path, ignore_errors=True)


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
    state_dir = Path(tempfile.mkdtemp(prefix="sbk-"))
    caps = SessionCaps(total=8, per_caller=8, basis="set by the tests")
    pool = PoolSettings(size=2)
    try:
        async with DockerBackend(
            image=SANDBOX_IMAGE, state_dir=state_dir, session_caps=caps, pool=pool
        ) as backend:
            box = spec()
            await sh(backend, "other", "true", box)  # a spec asked for again is kept warm
            await sh(backend, "source", "echo warm > /tmp/state", box)
            with anyio.fail_after(60):
                while len(backend._sessions.pool.boxes()) < 2:
                    await anyio.sleep(0.05)
            outcomes = await backend.fork("source", ["f1", "f2"])
            assert all(o.sandbox.startswith("sandboxd-pool-") for o in outcomes), outcomes
            assert await sh(backend, "f2", "cat /tmp/state", box) == "warm\n"
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


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
