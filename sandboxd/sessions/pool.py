"""The warm pool: sandboxes started ahead of time for the specs callers ask for again and again.

WHY keyed by the whole SandboxSpec (mounts with their pinned identities, uid, limits,
network, image): Docker cannot add a bind mount to a running container, and attaching the
allowed paths at claim time would need the daemon to mount into the host's mount namespace
(root, CAP_SYS_ADMIN) and a propagation path from the host into every sandbox. A warm
sandbox is instead exactly the sandbox a normal start would have made for that spec, its
mounts already checked against the identities in the spec (sandboxd.docker.mount_check), so a claim
weakens nothing: a hit needs the identity the policy pinned for this request to be the one
the warm sandbox showed, and a bind mount held by a live container keeps its inode from
being reused. A miss (a new workspace, another uid) is a normal start.

The places follow demand: a spec claimed again takes the warm places of its caller's specs
not claimed since its previous claim, the least recently claimed first, within the size and
memory budgets (see `_current`). WHY: a person moves from one project to the next, a batch
follows an interactive session; the places of what they left would sit idle for `remember_s`
while what they use now starts cold.

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

from sandboxd.backend import BackendError, SandboxSpec, TooManySessionsError, WarmPlaces
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
        start: Callable[[SandboxSpec], Awaitable[BoxT]],
        discard: Callable[[BoxT, str], Coroutine[Any, Any, None]],
        usable: Callable[[BoxT], bool],
        spawn: Callable[..., None],
    ) -> None:
        """`has_room(uid)`: whether the session caps leave a place for one more sandbox of
        `uid`; `start`: a new sandbox for a spec with its slot set (BackendError when it cannot
        start); `discard`: tear
        one down (its slot given back); `usable`: whether a warm one can still run commands;
        `spawn(fn, *args)`: run a task in the backend's task group."""
        self.settings = settings
        self._has_room = has_room
        self._start = start
        self._discard = discard
        self._usable = usable
        self._spawn = spawn
        self._asked: dict[SandboxSpec, float] = {}
        """Specs claimed (a start asked for them), with when last, oldest first."""
        self._previous: dict[SandboxSpec, float] = {}
        """Those claimed again while remembered, with when they were claimed the time before:
        only they are kept warm. WHY: a spec seen once (each task of a batch mounts a
        workspace of its own) may never come back, and warming it would cost a container
        start for nothing."""
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
        """A start claims `spec`: keep sandboxes warm for it."""
        if not self.enabled or self.closed:
            return
        before = self._asked.pop(spec, None)
        if before is not None:
            self._previous[spec] = before
            self._wake.set()
        self._asked[spec] = time.monotonic()
        while len(self._asked) > MAX_REMEMBERED:
            self._forget(next(iter(self._asked)))

    def places(self) -> list[WarmPlaces]:
        """The specs holding warm places (ready or starting), the most lately claimed first."""
        current = set(self._current())
        ready = {spec: len(boxes) for spec, boxes in self._warm.items() if boxes}
        specs = [spec for spec in reversed(self._asked) if spec in ready or spec in self.filling]
        specs += [spec for spec in ready if spec not in self._asked]  # forgotten, going
        now, wall = time.monotonic(), time.time()
        return [
            WarmPlaces(
                spec=spec,
                warm=ready.get(spec, 0),
                starting=self.filling.count(spec),
                last_claimed_at=wall - (now - self._asked[spec]) if spec in self._asked else None,
                kept_warm=spec in current,
            )
            for spec in specs
        ]

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

    def adopt(self, spec: SandboxSpec, box: BoxT) -> bool:
        """Keep a warm sandbox the daemon before left, as if its spec had just been claimed
        (it stays while remembered, and goes first when a current spec needs its place);
        False when the size or memory budget has no room for it (the caller discards it)."""
        if not self.enabled or self.closed:
            return False
        held = [s for s, boxes in self._warm.items() for _ in boxes]
        memory = sum(s.limits.memory for s in held) + spec.limits.memory
        if len(held) >= self.settings.size or memory > self.settings.memory:
            return False
        self._asked.setdefault(spec, time.monotonic())
        self._warm.setdefault(spec, []).append(box)
        return True

    def release(self) -> list[BoxT]:
        """Fill no more; hand every warm sandbox over, none discarded (the daemon leaves them
        running for the next one)."""
        self.closed = True
        self._asked.clear()
        self._previous.clear()
        boxes = self.boxes()
        self._warm.clear()
        return boxes

    async def close(self) -> None:
        """Fill no more; discard every warm sandbox."""
        self.closed = True
        self._asked.clear()
        self._previous.clear()
        doomed = self.boxes()
        self._warm.clear()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as removals:
                for box in doomed:
                    removals.start_soon(self._discard, box, "the sandbox daemon shut down")

    def _forget(self, spec: SandboxSpec) -> None:
        del self._asked[spec]
        self._previous.pop(spec, None)

    def _current(self) -> list[SandboxSpec]:
        """The specs kept warm now, the most lately claimed first: those claimed again, and
        claimed at least once since the previous claim of their caller's (uid's) spec
        claimed again last.

        WHY that window: a spec claimed twice with no claim of another in between is what
        its caller uses now, and the caller's others wait cold; specs claimed in turn share
        the places. Per caller, so that one user's switch never makes another's specs
        give their places up (they share them, as specs claimed in turn do)."""
        again = [spec for spec in reversed(self._asked) if spec in self._previous]
        since: dict[int, float] = {}
        for spec in again:
            since.setdefault(spec.uid, self._previous[spec])
        return [spec for spec in again if self._asked[spec] >= since[spec.uid]]

    def _trim(self) -> None:
        forgotten_before = time.monotonic() - self.settings.remember_s
        for spec, asked_at in list(self._asked.items()):
            if asked_at < forgotten_before:
                self._forget(spec)
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
        """Start warm sandboxes for the current specs, the one with the fewest first (ties:
        the latest claimed), while the size, memory and caps allow, once the other specs'
        warm sandboxes have made room."""
        if self.closed or self._holds or time.monotonic() < self._retry_at:
            return
        while len(self.filling) < FILLS_AT_ONCE:
            current = self._current()
            if not current:
                return
            spec = min(current, key=lambda s: len(self._warm.get(s, ())) + self.filling.count(s))
            if not self._room_for(spec, current) or not self._has_room(spec.uid):
                return
            self.filling.append(spec)
            self._spawn(self._fill_one, spec)

    def _room_for(self, spec: SandboxSpec, current: list[SandboxSpec]) -> bool:
        """Whether one more warm sandbox of `spec` fits the size and memory budgets, once
        the warm sandboxes that may give way to it are discarded (see `_givers`); only as
        many as it needs are. WHY all or nothing: a sandbox discarded for a place that
        still does not fit would be lost for nothing."""
        held = [s for s, boxes in self._warm.items() for _ in boxes] + self.filling

        def fits(specs: list[SandboxSpec]) -> bool:
            memory = sum(s.limits.memory for s in specs) + spec.limits.memory
            return len(specs) < self.settings.size and memory <= self.settings.memory

        if fits(held):
            return True
        taken: list[SandboxSpec] = []
        for giver in self._givers(spec, current, held):
            held.remove(giver)
            taken.append(giver)
            if fits(held):
                break
        else:
            return False
        for giver in taken:
            self._spawn(self._give_back, self._warm[giver].pop(0))
        return True

    def _givers(
        self, spec: SandboxSpec, current: list[SandboxSpec], held: list[SandboxSpec]
    ) -> list[SandboxSpec]:
        """The specs whose warm sandboxes may give way to one of `spec`, one entry each, in
        order: specs not current, the least lately claimed first; then current ones holding
        at least two places more than `spec` (so that specs claimed in turn share the places
        without taking them back and forth), the one holding the most first."""
        others = sorted(
            (s for s in self._warm if s not in current),
            key=lambda s: self._asked.get(s, float("-inf")),  # forgotten ones first
        )
        givers = [s for s in others for _ in self._warm[s]]
        mine = held.count(spec)
        for other in sorted(current, key=held.count, reverse=True):
            spare = min(held.count(other) - mine - 1, len(self._warm.get(other, ())))
            givers += [other] * max(0, spare)
        return givers

    async def _give_back(self, box: BoxT) -> None:
        """Discard a warm sandbox whose place a spec claimed now takes, then fill."""
        try:
            await self._discard(box, "its place in the warm pool went to a spec claimed lately")
        finally:
            self._wake.set()

    async def _fill_one(self, spec: SandboxSpec) -> None:
        try:
            try:
                started = await self._start(spec)
            except TooManySessionsError:
                return  # a caller's start took the last place meanwhile: theirs come first
            except BackendError as exc:
                self._failed(spec, exc.message)
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
