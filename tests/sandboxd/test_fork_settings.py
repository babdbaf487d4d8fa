"""Forks with sandbox settings of their own, and forks of one session at once, against the
real Docker engine: each fork mounts its own paths (checked like a start's), no two
sandboxes write to one host path unasked, and the session's commands wait for its copies."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from logos.options import AllowedPath, ExecOptions
from sandboxd.api import API_PREFIX
from sandboxd.client.runner import SandboxForkError, SandboxRunner
from tests.support.sandboxd_harness import running_daemon

pytestmark = [pytest.mark.docker]


@pytest.fixture
def spaces() -> Iterator[list[Path]]:
    made = [Path(tempfile.mkdtemp(prefix=f"sbk-fs{n}-")) for n in range(3)]
    for path in made:
        path.chmod(0o777)
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def writable(path: Path) -> ExecOptions:
    return ExecOptions(allowed_paths=(AllowedPath(str(path), read_only=False),), workdir=str(path))


@pytest.mark.anyio
async def test_each_fork_mounts_the_paths_it_was_given_and_not_the_sessions(
    docker_client: Any, spaces: list[Path]
) -> None:
    source_space, first, second = spaces
    (first / "mine.txt").write_text("first\n")
    with running_daemon(docker_client) as daemon:
        runner = SandboxRunner(daemon.socket)
        forks: list[SandboxRunner] = []
        try:
            prepared = await runner.run("echo prepared > ~/state", writable(source_space))
            assert prepared.ok, prepared
            for space in (first, second):
                forks += await runner.fork(1, options=writable(space))
            for fork, space in zip(forks, (first, second), strict=True):
                seen = await fork.run(
                    f"cat ~/state; ls; test ! -e {source_space} && echo no-source "
                    f"&& echo {fork.session} > out.txt",
                    writable(space),
                )
                assert seen.ok, seen
                assert seen.stdout.startswith("prepared\n") and "no-source" in seen.stdout
                assert (space / "out.txt").read_text() == f"{fork.session}\n"
            assert "mine.txt" in (await forks[0].run("ls", writable(first))).stdout
            assert "mine.txt" not in (await forks[1].run("ls", writable(second))).stdout
        finally:
            for fork in forks:
                await fork.aclose()
            await runner.aclose()


def test_fork_settings_are_refused_as_a_start_would_be_and_shared_writers_are_named(
    docker_client: Any, spaces: list[Path]
) -> None:
    space = spaces[0]
    with running_daemon(docker_client) as daemon, daemon.client() as http:
        fork = f"{API_PREFIX}/sessions/src/fork"
        ran = http.post(f"{API_PREFIX}/run", json={"session": "src", "command": "true"})
        assert ran.status_code == 200, ran.text

        def ask(sandbox: Mapping[str, object], *into: str, **extra: object) -> Any:
            return http.post(fork, json={"into": list(into), "sandbox": sandbox, **extra})

        outside = ask({"allowed_paths": [{"path": "/proc", "read_only": True}]}, "a")
        assert outside.status_code == 403, outside.text
        assert ask({"image": "busybox:nope"}, "a").status_code == 403
        assert ask({"allowed_paths": [{"path": str(space)}], "bogus": 1}, "a").status_code == 422
        rw = {"allowed_paths": [{"path": str(space), "read_only": False}]}
        shared = ask(rw, "a", "b")
        assert shared.status_code == 409, shared.text
        assert shared.json()["error"]["code"] == "writable_mounts"
        assert str(space) in shared.json()["error"]["message"]
        assert http.get(f"{API_PREFIX}/sessions").json()["sessions"][0]["id"] == "src"
        assert len(http.get(f"{API_PREFIX}/sessions").json()["sessions"]) == 1
        both = ask(rw, "a", "b", share_writable_mounts=True)
        assert both.status_code == 200, both.text
        one = ask(rw, "c")
        assert one.status_code == 200, one.text
        read_only = ask({"allowed_paths": [{"path": str(space), "read_only": True}]}, "d", "e")
        assert read_only.status_code == 200, read_only.text


def test_a_writer_the_session_and_a_fork_would_share_is_refused(
    docker_client: Any, spaces: list[Path]
) -> None:
    parent = spaces[0]
    child = parent / "sub"
    child.mkdir()
    child.chmod(0o777)
    with running_daemon(docker_client) as daemon, daemon.client() as http:
        rw_parent = {"allowed_paths": [{"path": str(parent), "read_only": False}]}
        ran = http.post(
            f"{API_PREFIX}/run", json={"session": "src", "command": "true", **rw_parent}
        )
        assert ran.status_code == 200, ran.text
        inside = {"allowed_paths": [{"path": str(child), "read_only": False}]}
        refused = http.post(
            f"{API_PREFIX}/sessions/src/fork", json={"into": ["a"], "sandbox": inside}
        )
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "writable_mounts"
        elsewhere = {"allowed_paths": [{"path": str(spaces[1]), "read_only": False}]}
        made = http.post(
            f"{API_PREFIX}/sessions/src/fork", json={"into": ["a"], "sandbox": elsewhere}
        )
        assert made.status_code == 200, made.text


@pytest.mark.anyio
async def test_forks_of_one_session_copy_it_at_once_and_its_commands_wait_for_them(
    docker_client: Any, spaces: list[Path]
) -> None:
    with running_daemon(docker_client) as daemon:
        runner = SandboxRunner(daemon.socket)
        forks: list[SandboxRunner] = []
        try:
            made = await runner.run("head -c 100000000 /dev/urandom > /tmp/big", ExecOptions())
            assert made.ok, made
            waited: list[float] = []
            into: dict[str, Path] = {}

            async def fork_into(space: Path) -> None:
                (forked,) = await runner.fork(1, options=writable(space))
                forks.append(forked)
                into[forked.session] = space

            async def change_the_source() -> None:
                # Once every fork's session is there, the copies are under way or ahead.
                with anyio.fail_after(60), daemon.client() as http:
                    while len(http.get(f"{API_PREFIX}/sessions").json()["sessions"]) < 4:
                        await anyio.sleep(0.01)
                began = time.monotonic()
                changed = await runner.run("rm /tmp/big && echo gone", ExecOptions())
                assert changed.stdout == "gone\n", changed
                waited.append(time.monotonic() - began)

            async with anyio.create_task_group() as group:
                for space in spaces:
                    group.start_soon(fork_into, space)
                group.start_soon(change_the_source)
            assert len(forks) == 3
            for fork in forks:
                # With the settings it was forked with (others would start another sandbox).
                size = await fork.run("stat -c %s /tmp/big", writable(into[fork.session]))
                assert size.stdout == "100000000\n", size
        finally:
            for fork in forks:
                await fork.aclose()
            await runner.aclose()
    assert waited and waited[0] > 0


@pytest.mark.anyio
async def test_a_fork_the_caps_refuse_is_a_429_the_runner_can_tell(docker_client: Any) -> None:
    with running_daemon(docker_client, "max_sessions_per_caller = 2\n") as daemon:
        runner = SandboxRunner(daemon.socket)
        other = SandboxRunner(daemon.socket)
        try:
            assert (await runner.run("true", ExecOptions())).ok
            assert (await other.run("true", ExecOptions())).ok
            with pytest.raises(SandboxForkError, match=r"\(429 too_many_sessions\)"):
                await runner.fork(1)
        finally:
            await other.aclose()
            await runner.aclose()


def test_a_fork_runs_the_sessions_image_as_its_user(docker_client: Any) -> None:
    with running_daemon(docker_client) as daemon, daemon.client() as http:
        ran = http.post(f"{API_PREFIX}/run", json={"session": "src", "command": "id -u"})
        assert ran.status_code == 200, ran.text
        uid = ran.json()["stdout"].strip()
        assert uid == str(os.getuid())
        made = http.post(f"{API_PREFIX}/sessions/src/fork", json={"into": ["a"], "sandbox": {}})
        assert made.status_code == 200, made.text
        seen = http.post(f"{API_PREFIX}/run", json={"session": "a", "command": "id -u"})
        assert seen.json()["stdout"].strip() == uid
