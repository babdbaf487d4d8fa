"""The engine-agnostic session bookkeeping (sandboxd.sessions.table), with a backend of plain
directories: one start per (session, spec), caps, retiring, closing, idle reaping."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.backend import (
    BackendError,
    SandboxSpec,
    SandboxStartError,
    SessionLostError,
    TooManySessionsError,
)
from sandboxd.sessions.caps import SessionCaps
from sandboxd.sessions.lost import LOST_FILE, LostSessions
from sandboxd.sessions.table import Sandbox, Sessions

pytestmark = pytest.mark.anyio
SPEC = SandboxSpec("image", (), False, 1000, 1000)


@dataclass(eq=False)
class DirectorySandbox(Sandbox):
    """A sandbox that is a real directory: started by creating it, torn down by removing it."""

    path: Path
    torn_down_because: str | None = None


class DirectoryBackend:
    """The two things a backend gives Sessions, with a directory per sandbox."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.starts = 0
        self.refuse_with: str | None = None

    async def start(self, session: str, spec: SandboxSpec) -> DirectorySandbox:
        self.starts += 1
        await anyio.sleep(0.05)  # other starts of the same sandbox arrive meanwhile
        if self.refuse_with is not None:
            raise SandboxStartError(self.refuse_with)
        path = Path(tempfile.mkdtemp(prefix=f"{session}-", dir=self.root))
        return DirectorySandbox(path.name, session, spec, path)

    async def tear_down(self, box: DirectorySandbox, reason: str) -> None:
        box.torn_down_because = reason
        box.path.rmdir()


@dataclass
class Setup:
    sessions: Sessions[DirectorySandbox]
    backend: DirectoryBackend


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async with anyio.create_task_group() as tasks:
        yield make_setup(tmp_path, tasks.start_soon, total=2, idle_ttl_s=600)
        tasks.cancel_scope.cancel()


def make_setup(
    root: Path,
    spawn: Callable[..., Any],
    *,
    total: int,
    idle_ttl_s: float,
    lost: LostSessions | None = None,
) -> Setup:
    backend = DirectoryBackend(root)
    sessions: Sessions[DirectorySandbox] = Sessions(
        caps=SessionCaps(total=total, per_caller=total, basis="test"),
        idle_ttl_s=idle_ttl_s,
        start=backend.start,
        tear_down=backend.tear_down,
        spawn=spawn,
        lost=lost,
    )
    return Setup(sessions, backend)


async def test_concurrent_requests_for_one_sandbox_start_it_once(setup: Setup) -> None:
    found: list[DirectorySandbox] = []

    async def want() -> None:
        found.append(await setup.sessions.sandbox_for("s", SPEC))

    async with anyio.create_task_group() as requests:
        for _ in range(5):
            requests.start_soon(want)
    assert setup.backend.starts == 1
    assert len({id(box) for box in found}) == 1
    assert [info.id for info in setup.sessions.infos()] == ["s"]


async def test_a_start_over_the_cap_is_refused_and_a_failed_start_gives_its_place_back(
    setup: Setup,
) -> None:
    await setup.sessions.sandbox_for("a", SPEC)
    setup.backend.refuse_with = "the image is broken"
    with pytest.raises(SandboxStartError, match="the image is broken"):
        await setup.sessions.sandbox_for("b", SPEC)
    setup.backend.refuse_with = None
    await setup.sessions.sandbox_for("b", SPEC)
    with pytest.raises(TooManySessionsError, match="max_sessions"):
        await setup.sessions.sandbox_for("c", SPEC)
    assert setup.sessions.slots.in_use == 2


async def test_closing_a_session_tears_its_sandbox_down_and_frees_its_place(
    setup: Setup,
) -> None:
    box = await setup.sessions.sandbox_for("a", SPEC)
    assert isinstance(box, DirectorySandbox) and box.path.is_dir()
    assert await setup.sessions.close("a")
    assert not box.path.exists() and box.torn_down_because is not None
    assert "session a was closed" in box.torn_down_because
    assert setup.sessions.slots.in_use == 0 and setup.sessions.infos() == []
    assert not await setup.sessions.close("a")
    assert (await setup.sessions.sandbox_for("a", SPEC)) is not box


async def test_a_retired_sandbox_is_replaced_by_a_fresh_one(setup: Setup) -> None:
    box = await setup.sessions.sandbox_for("a", SPEC)
    assert isinstance(box, DirectorySandbox)
    await setup.sessions.retire(box, "its supervisor stopped")
    await setup.sessions.retire(box, "twice")  # once only
    assert box.torn_down_because == "its supervisor stopped"
    fresh = await setup.sessions.sandbox_for("a", SPEC)
    assert fresh is not box and setup.sessions.slots.in_use == 1


async def test_a_lost_sandbox_refuses_its_session_until_a_fresh_start_or_a_close(
    tmp_path: Path,
) -> None:
    """Never an empty sandbox under the old name; and a daemon after this one still knows."""
    async with anyio.create_task_group() as tasks:
        setup = make_setup(
            tmp_path,
            tasks.start_soon,
            total=4,
            idle_ttl_s=600,
            lost=LostSessions(tmp_path / LOST_FILE),
        )
        box = await setup.sessions.sandbox_for("a", SPEC)
        other = await setup.sessions.sandbox_for("b", SPEC)
        await setup.sessions.retire(box, "its container was removed", lost="it was removed")
        await setup.sessions.retire(other, "idle for more than 600 s")  # not lost: reaped
        for _ in range(2):
            with pytest.raises(SessionLostError, match="it was removed") as refused:
                await setup.sessions.sandbox_for("a", SPEC)
        assert refused.value.session == "a" and setup.backend.starts == 2
        assert (await setup.sessions.sandbox_for("b", SPEC)) is not other
        later = make_setup(
            tmp_path,
            tasks.start_soon,
            total=4,
            idle_ttl_s=600,
            lost=LostSessions(tmp_path / LOST_FILE),
        )
        with pytest.raises(SessionLostError):
            await later.sessions.sandbox_for("a", SPEC)
        fresh = await later.sessions.start("a", SPEC, fresh=True)
        assert fresh.started and fresh.replaced is not None
        assert fresh.replaced.reason == "it was removed"
        assert (await later.sessions.sandbox_for("a", SPEC)) is fresh.box
        await setup.sessions.retire(await setup.sessions.sandbox_for("c", SPEC), "x", lost="gone")
        assert await setup.sessions.close("c")  # a lost session is closed, and forgotten
        assert (await setup.sessions.sandbox_for("c", SPEC)).session == "c"
        tasks.cancel_scope.cancel()


async def test_taken_over_sandboxes_count_under_the_caps_even_over_them(setup: Setup) -> None:
    for name in ("a", "b", "c"):
        assert setup.sessions.adopt(DirectorySandbox(name, name, SPEC, setup.backend.root))
    assert setup.sessions.slots.in_use == 3  # over the cap of 2: nothing new starts
    assert not setup.sessions.adopt(DirectorySandbox("a2", "a", SPEC, setup.backend.root))
    with pytest.raises(TooManySessionsError):
        await setup.sessions.sandbox_for("d", SPEC)
    assert (await setup.sessions.sandbox_for("a", SPEC)).name == "a"


async def test_after_close_all_no_sandbox_starts(setup: Setup) -> None:
    boxes = [await setup.sessions.sandbox_for(name, SPEC) for name in ("a", "b")]
    await setup.sessions.close_all("the daemon shut down")
    assert all(isinstance(box, DirectorySandbox) and not box.path.exists() for box in boxes)
    with pytest.raises(BackendError, match="shutting down"):
        await setup.sessions.sandbox_for("c", SPEC)
    assert setup.sessions.slots.in_use == 0


async def test_idle_sandboxes_are_reaped_and_busy_ones_kept(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tasks:
        setup = make_setup(tmp_path, tasks.start_soon, total=4, idle_ttl_s=0.2)
        tasks.start_soon(setup.sessions.reap_idle)
        idle = await setup.sessions.sandbox_for("idle", SPEC)
        busy = await setup.sessions.sandbox_for("busy", SPEC)
        assert isinstance(idle, DirectorySandbox) and isinstance(busy, DirectorySandbox)
        with busy.running_command():
            await _until(lambda: idle.torn_down_because is not None)
            assert busy.torn_down_because is None
        assert idle.torn_down_because == "idle for more than 0.2 s"
        await _until(lambda: busy.torn_down_because is not None)
        assert setup.sessions.slots.in_use == 0
        tasks.cancel_scope.cancel()


async def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.02)
