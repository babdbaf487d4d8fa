"""The warm pool: sandboxes started ahead of time for the specs callers ask for again and again.

WHY keyed by the whole SandboxSpec (mounts with their pinned identities, uid, limits,
network, image): Docker cannot add a bind mount to a running container, and attaching the
allowed paths at claim time would need the daemon to mount into the host's mount namespace
(root, CAP_SYS_ADMIN) and a propagation path from the host into every sandbox. A warm
sandbox is instead exactly the sandbox a normal start would have made for that spec, its
mounts already checked against the identities in the spec (sandboxd.mount_check), so a claim
weakens nothing: a hit needs the identity the policy pinned for this request to be the one
the warm sandbox showed, and a bind mount held by a live container keeps its inode from
being reused. A miss (a new workspace, another uid) is a normal start.

A warm sandbox holds its place under the session caps (SessionSlots) while it waits; a start
that finds the caps full takes one back first. A claimed sandbox leaves the pool for good: it
is never handed to a second session, and is removed, not returned, when its session ends.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Annotated, Any, Generic, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from sandboxd.backend import BackendError, SandboxSpec, TooManySessionsError
from sandboxd.sizes import Size

__all__ = ["PoolSettings", "WarmPool"]

FILLS_AT_ONCE = 2
"""Warm starts under way at once: the pool must not crowd out the starts callers wait for."""
RETRY_FIRST_S = 2.0
"""After a fill failed (engine down, image missing), the pool waits this long, doubling up to
RETRY_MAX_S, before it tries again; the failure is logged once per streak."""
RETRY_MAX_S = 60.0
MAX_REMEMBERED = 1024
"""Specs remembered at most (the oldest forgotten first): callers choose their paths, so
the specs they ask for are theirs to multiply; what the daemon holds for them is bounded."""
CHECK_S = 1.0
"""How often the pool looks for forgotten specs and dead warm sandboxes, even unwoken."""

logger = logging.getLogger(__name__)


class PoolSettings(BaseModel):
    """The config's `[pool]` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(default=0, ge=0, le=256)
    """Warm sandboxes kept at most, over all specs (0, the default: no pool, every start is a
    cold one). WHY off unless set: a warm sandbox holds a place under the session caps and
    keeps its caller's paths mounted while nobody uses it; the operator chooses that."""
    memory: Annotated[Size, Field(ge=0)] = 4 * 1024**3
    """The memory limits of the warm sandboxes add up to at most this (bytes or "4g")."""
    remember_s: float = Field(default=600.0, gt=0, le=86400)
    """Sandboxes are kept warm for a spec started at least twice, the last time less than
    this long ago."""


BoxT = TypeVar("BoxT")


class WarmPool(Generic[BoxT]):
    """Warm sandboxes per spec, refilled in the background (`run`), taken once (`take`)."""

    def __init__(
        self,
        settings: PoolSettings,
        *,
        has_room: Callable[[int], bool],
        start: Callable[[SandboxSpec], Awaitable[BoxT | str]],
        discard: Callable[[BoxT, str], Coroutine[Any, Any, None]],
        usable: Callable[[BoxT], bool],
        spawn: Callable[..., None],
    ) -> None:
        """`has_room(uid)`: whether the session caps leave a place for one more sandbox of
        `uid`; `start`: a new sandbox for a spec with its slot set, or why not; `discard`: tear
        one down (its slot given back); `usable`: whether a warm one can still run commands;
        `spawn(fn, *args)`: run a task in the backend's task group."""
        self.settings = settings
        self._has_room = has_room
        self._start = start
        self._discard = discard
        self._usable = usable
        self._spawn = spawn
        self._asked: dict[SandboxSpec, float] = {}
        """Specs asked for, with when last, oldest first."""
        self._again: set[SandboxSpec] = set()
        """Those asked for again while remembered: only they are kept warm. WHY: a spec seen
        once (each task of a batch mounts a workspace of its own) may never come back, and
        warming it would cost a container start for nothing."""
        self._warm: dict[SandboxSpec, list[BoxT]] = {}
        self.filling: list[SandboxSpec] = []
        """Specs of the warm sandboxes starting now (one entry each): a caller's start that
        finds the caps full may wait for one, then take its place."""
        self._wake = anyio.Event()
        self._holds = 0
        self._retry_at = 0.0
        self._retry_s = RETRY_FIRST_S
        self.closed = False
        self.last_failure: str | None = None
        """Why the last fill failed, until one succeeds (for the daemon's health)."""

    @property
    def enabled(self) -> bool:
        return self.settings.size > 0

    @property
    def remembered(self) -> int:
        """Specs the pool remembers now."""
        return len(self._asked)

    def boxes(self) -> list[BoxT]:
        """Every warm sandbox (gc leaves them alone)."""
        return [box for boxes in self._warm.values() for box in boxes]

    def note(self, spec: SandboxSpec) -> None:
        """A start asked for `spec`: keep sandboxes warm for it."""
        if not self.enabled or self.closed:
            return
        if self._asked.pop(spec, None) is not None:
            self._again.add(spec)
            self._wake.set()
        self._asked[spec] = time.monotonic()
        while len(self._asked) > MAX_REMEMBERED:
            oldest = next(iter(self._asked))
            del self._asked[oldest]
            self._again.discard(oldest)

    def take(self, spec: SandboxSpec) -> BoxT | None:
        """A warm sandbox for exactly `spec`, removed from the pool; None on a miss."""
        boxes = self._warm.get(spec)
        while boxes:
            box = boxes.pop(0)
            if self._usable(box):
                self._wake.set()
                return box
            self._spawn(self._discard, box, "its supervisor stopped while it was warm")
        return None

    def give_up_one(self, uid: int | None) -> BoxT | None:
        """The oldest warm sandbox (of `uid`, or of anyone), removed from the pool, so that a
        caller's start can have its place under the caps; None if there is none."""
        for spec in list(self._asked):
            boxes = self._warm.get(spec)
            if boxes and (uid is None or spec.uid == uid):
                return boxes.pop(0)
        for spec, boxes in self._warm.items():  # forgotten specs not yet discarded
            if boxes and (uid is None or spec.uid == uid):
                return boxes.pop(0)
        return None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Start no fill meanwhile (those under way go on), then catch up.

        WHY: a fill is a container start, a second or so of the engine's CPU; for work a
        caller waits on (a fork's copy) that took as long again on 2 cores."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            self._wake.set()

    async def run(self) -> None:
        """Fill and trim the pool until cancelled."""
        while True:
            with anyio.move_on_after(CHECK_S):
                await self._wake.wait()
            self._wake = anyio.Event()
            self._trim()
            self._fill()

    async def close(self) -> None:
        """Fill no more; discard every warm sandbox."""
        self.closed = True
        self._asked.clear()
        self._again.clear()
        doomed = self.boxes()
        self._warm.clear()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as removals:
                for box in doomed:
                    removals.start_soon(self._discard, box, "the sandbox daemon shut down")

    def _trim(self) -> None:
        forgotten_before = time.monotonic() - self.settings.remember_s
        for spec, asked_at in list(self._asked.items()):
            if asked_at < forgotten_before:
                del self._asked[spec]
                self._again.discard(spec)
        for spec, boxes in list(self._warm.items()):
            keep = [box for box in boxes if self._usable(box)] if spec in self._asked else []
            for box in boxes:
                if box not in keep:
                    self._spawn(self._discard, box, "no start asked for its spec lately")
            if keep:
                self._warm[spec] = keep
            else:
                del self._warm[spec]

    def _fill(self) -> None:
        """Start warm sandboxes, the spec with the fewest first (ties: the latest asked), while
        the size, memory and caps allow."""
        if self.closed or self._holds or time.monotonic() < self._retry_at:
            return
        while len(self.filling) < FILLS_AT_ONCE:
            held = len(self.boxes()) + len(self.filling)
            recent = [spec for spec in reversed(self._asked) if spec in self._again]
            if held >= self.settings.size or not recent:
                return
            spec = min(recent, key=lambda s: len(self._warm.get(s, ())) + self.filling.count(s))
            if self._memory() + spec.limits.memory > self.settings.memory:
                return
            if not self._has_room(spec.uid):
                return
            self.filling.append(spec)
            self._spawn(self._fill_one, spec)

    def _memory(self) -> int:
        specs = [spec for spec, boxes in self._warm.items() for _ in boxes] + self.filling
        return sum(spec.limits.memory for spec in specs)

    async def _fill_one(self, spec: SandboxSpec) -> None:
        try:
            try:
                started = await self._start(spec)
            except TooManySessionsError:
                return  # a caller's start took the last place meanwhile: theirs come first
            except BackendError as exc:
                started = exc.message
            if isinstance(started, str):
                self._failed(spec, started)
                return
            if self.closed or spec not in self._asked:
                await self._discard(started, "its spec was forgotten while it started")
                return
            self._warm.setdefault(spec, []).append(started)
            if self.last_failure is not None:
                logger.warning("the warm pool fills again")
            self.last_failure = None
            self._retry_s = RETRY_FIRST_S
        finally:
            self.filling.remove(spec)
            self._wake.set()

    def _failed(self, spec: SandboxSpec, reason: str) -> None:
        if self.closed:
            return  # a start cut short by the shutdown
        if self.last_failure is None:
            logger.warning(
                "the warm pool cannot start a sandbox from image %s (%s): new sessions start "
                "without it (slower) until it can; retrying in %.0f s",
                spec.image,
                reason,
                self._retry_s,
            )
        self.last_failure = reason
        self._retry_at = time.monotonic() + self._retry_s
        self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
