"""A backend's sessions: which sandbox each session has for each spec, from start to removal.

Engine-agnostic bookkeeping any backend shares: one start at a time per (session, spec) (its
start lock), a place under the session caps from before a sandbox starts until it is torn
down, idle reaping, retiring (fail in-flight commands, tear down), the sessions whose sandbox
was lost (sandboxd.sessions.lost), listing and closing; and, for a backend that keeps its
sandboxes across restarts, taking over those of the daemon before (`adopt`) and leaving them
running at the end (`detach_all`). The backend says how a sandbox starts and how it is torn
down; see sandboxd.docker.backend.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

import anyio

from sandboxd.backend import BackendError, SandboxSpec, SessionInfo, SessionLostError
from sandboxd.sessions.caps import SessionCaps, SessionSlot, SessionSlots
from sandboxd.sessions.lost import LostSandbox, LostSessions
from sandboxd.sessions.pool import PoolSettings, WarmPool

_EVICTED = "removed while idle to make room for another sandbox under the session caps"
_EVICTION_GRACE_S = 1.0
"""A sandbox used this recently is not removed to make room: its command may be about to run
(a start and its first command are separate steps)."""
_CLAIM_POLL_S = 0.1
"""How often a start waiting for room looks again."""
POOL_SESSION = "pool"
"""The session a warm sandbox starts under (its container's name and label say so)."""
_GIVEN_UP = "removed from the warm pool to make room for a caller's sandbox under the caps"


@dataclass(eq=False)
class Sandbox:
    """One sandbox of a session; a backend subclasses it with how to reach it (its fields
    come after these three)."""

    name: str
    session: str
    spec: SandboxSpec
    created_at: float = field(default_factory=time.time, kw_only=True)
    last_used_at: float = field(default_factory=time.time, kw_only=True)
    running: int = field(default=0, kw_only=True)
    """Commands running now (and forks copying it)."""
    forking: int = field(default=0, kw_only=True)
    """Forks copying it now."""
    _copied: anyio.Event | None = field(default=None, kw_only=True, repr=False)
    retired: str | None = field(default=None, kw_only=True)
    """Why it may no longer run commands (set once)."""
    slot: SessionSlot | None = field(default=None, kw_only=True)
    """Its place under the session caps, given back once it is torn down (set once started)."""

    def usable(self) -> bool:
        """Whether it can take a command now; a backend may know better (a dead supervisor)."""
        return self.retired is None

    def stopped_reason(self) -> str | None:
        """Why it stopped working without anyone ending it (its backend knows: a dead
        supervisor), before it is retired; None while it works."""
        return None

    def touch(self) -> None:
        self.last_used_at = time.time()

    def hand_to(self, session: str) -> None:
        """A warm sandbox becomes `session`'s (once: it never goes back to the pool)."""
        self.session = session
        self.created_at = self.last_used_at = time.time()

    @property
    def commands(self) -> int:
        """Commands (and jobs) running now, forks' copies left out."""
        return self.running - self.forking

    @contextlib.contextmanager
    def copying(self) -> Iterator[None]:
        """Counts a fork while it copies this sandbox (idle reaping leaves it alone, commands
        wait for the copy: see `until_copied`)."""
        with self.running_command():
            self.forking += 1
            try:
                yield
            finally:
                self.forking -= 1
                if not self.forking and self._copied is not None:
                    self._copied.set()
                    self._copied = None

    async def until_copied(self) -> None:
        """Return once no fork copies this sandbox. WHY: a command must not change what a
        fork is copying; forks of one sandbox may copy it at once."""
        while self.forking:
            if self._copied is None:
                self._copied = anyio.Event()
            await self._copied.wait()

    @contextlib.contextmanager
    def running_command(self) -> Iterator[None]:
        """Counts a command while it runs, so that idle reaping leaves its sandbox alone."""
        self.running += 1
        self.touch()
        try:
            yield
        finally:
            self.running -= 1
            self.touch()


BoxT = TypeVar("BoxT", bound=Sandbox)


class Claimed(NamedTuple, Generic[BoxT]):
    """What `Sessions.start` found or did."""

    box: BoxT
    started: bool
    """This call started it (False: it ran already, or another call started it meanwhile)."""
    replaced: LostSandbox | None
    """A fresh start asked for replaced the session's lost sandbox: what was known of it."""


@dataclass(eq=False)
class _Session(Generic[BoxT]):
    id: str
    created_at: float = field(default_factory=time.time)
    sandboxes: dict[SandboxSpec, BoxT] = field(default_factory=dict)


class Sessions(Generic[BoxT]):
    """The live sandboxes of every session, and the rules of their lifecycle."""

    def __init__(
        self,
        *,
        caps: SessionCaps,
        idle_ttl_s: float,
        start: Callable[[str, SandboxSpec], Awaitable[BoxT]],
        tear_down: Callable[[BoxT, str], Awaitable[None]],
        spawn: Callable[..., None],
        pool: PoolSettings | None = None,
        lost: LostSessions | None = None,
        on_handed: Callable[[BoxT], Awaitable[None]] | None = None,
    ) -> None:
        """`start`: a new sandbox (BackendError, SandboxStartError among them, when it cannot
        start); `tear_down`: fail its in-flight commands with the reason and remove it;
        `spawn(fn, *args)`: run a task in the backend's task group; `pool`: how many
        sandboxes to keep warm (None: none); `lost`: where lost sessions are kept (default: in
        memory); `on_handed`: told (and waited for) when a warm sandbox becomes a
        session's."""
        if not idle_ttl_s > 0:
            raise ValueError(f"idle_ttl_s must be > 0 seconds, got {idle_ttl_s}")
        self.slots = SessionSlots(caps)
        self._idle_ttl_s = idle_ttl_s
        self._start = start
        self._tear_down = tear_down
        self._spawn = spawn
        self._on_handed = on_handed
        self.lost = lost if lost is not None else LostSessions()
        self._sessions: dict[str, _Session[BoxT]] = {}
        self._start_locks: dict[tuple[str, SandboxSpec], anyio.Lock] = {}
        self.closing = False
        """Set by close_all(): no sandbox starts any more."""
        self._retiring: set[BoxT] = set()
        """Sandboxes being torn down: their places free up soon."""
        self._being_started: list[SandboxSpec] = []
        """The specs of the sandboxes starting now (one entry per start)."""
        self.pool: WarmPool[BoxT] = WarmPool(
            pool or PoolSettings(size=0),
            has_room=lambda uid: self.slots.full_for(uid) is None,
            start=self._start_warm,
            discard=self.retire,
            usable=lambda box: box.usable(),
            spawn=spawn,
        )

    async def sandbox_for(self, session: str, spec: SandboxSpec) -> BoxT:
        """The session's live sandbox for `spec`, started if needed.

        Raises BackendError (SandboxStartError, SessionLostError, TooManySessionsError over a
        cap, shutting down, the backend's)."""
        return (await self.start(session, spec)).box

    async def start(self, session: str, spec: SandboxSpec, *, fresh: bool = False) -> Claimed[BoxT]:
        """`sandbox_for`, whether this call started the sandbox, and (`fresh`) the lost one it
        replaced: a lost session is refused (SessionLostError) unless `fresh`."""
        if self.closing:
            raise shutting_down()
        existing = self.live(session, spec)
        if existing is not None:
            return Claimed(existing, False, None)
        lock = self._start_locks.setdefault((session, spec), anyio.Lock())
        try:
            async with lock:
                existing = self.live(session, spec)
                if existing is not None:
                    return Claimed(existing, False, None)
                await self._retire_stopped(session, spec)
                lost = self.lost.get(session)
                if lost is not None and not fresh:
                    raise SessionLostError(session, lost.reason, lost.at)
                box = await self._new_sandbox(session, spec)
                self._sessions.setdefault(session, _Session(session)).sandboxes[spec] = box
                replaced = await self.lost.clear(session) if lost is not None else None
                return Claimed(box, True, replaced)
        finally:
            if session not in self._sessions:  # the start failed: nothing will retire it
                self._forget_start_locks(session)

    async def _retire_stopped(self, session: str, spec: SandboxSpec) -> None:
        """The session's sandbox of `spec` that stopped working and is not retired yet (its
        backend is about to) is retired now, as lost: no new one may start unawares."""
        record = self._sessions.get(session)
        stopped = record.sandboxes.get(spec) if record is not None else None
        if stopped is None or stopped.retired is not None or stopped.usable():
            return
        why = stopped.stopped_reason() or "it stopped working"
        await self.retire(stopped, why, lost=why)

    async def _new_sandbox(self, session: str, spec: SandboxSpec) -> BoxT:
        """A warm sandbox for `spec` handed to `session`, or one started for it."""
        self.pool.note(spec)
        warm = self.pool.take(spec)
        if warm is not None:
            warm.hand_to(session)
            if self._on_handed is not None:
                await self._on_handed(warm)
            return warm
        slot = await self._claim(spec)
        self._being_started.append(spec)
        try:
            started = await self._start(session, spec)
        except BaseException:
            slot.release()
            raise
        finally:
            self._being_started.remove(spec)
        started.slot = slot
        return started

    async def remember_lost(self, session: str, spec: SandboxSpec, why: str, name: str) -> None:
        """The session's sandbox `name` of `spec` is gone, and why, unless nothing was lost
        with it (a warm one; a temenos caller's, which gets a fresh sandbox every command)."""
        if session != POOL_SESSION and not spec.reclaimable:
            await self.lost.mark(session, why, name)

    def adopt(self, box: BoxT) -> bool:
        """Take over a sandbox the daemon before left running: it holds a place under the
        caps from now on, even over them (it exists already: new starts wait for room).
        False when its session has one of its spec already (the caller removes it)."""
        record = self._sessions.setdefault(box.session, _Session(box.session))
        if box.spec in record.sandboxes:
            return False
        box.slot = self.slots.hold(box.spec.uid)
        record.sandboxes[box.spec] = box
        return True

    async def _claim(self, spec: SandboxSpec) -> SessionSlot:
        """A place under the caps for a new sandbox of `spec`. Over a cap, the least recently
        used idle reclaimable sandbox within it is removed first; while every reclaimable one
        is busy (or being removed), this waits up to the caps' wait_s for one; then (or
        with nothing reclaimable) TooManySessionsError. The claim itself never awaits, so
        concurrent starts count."""
        deadline = time.monotonic() + self.slots.caps.wait_s
        while True:
            scope = self.slots.full_for(spec.uid)
            if scope is None:
                return self.slots.claim(spec.uid)
            uid = spec.uid if scope == "caller" else None
            warm = self.pool.give_up_one(uid)
            if warm is not None:
                await self.retire(warm, _GIVEN_UP)
                continue
            victim = self._eviction_victim(uid)
            if victim is not None:
                await self.retire(victim, _EVICTED)
                continue
            if not self._reclaimable_soon(uid) or time.monotonic() >= deadline:
                return self.slots.claim(spec.uid)  # raises TooManySessionsError
            await anyio.sleep(_CLAIM_POLL_S)

    def _eviction_victim(self, uid: int | None) -> BoxT | None:
        """The least recently used idle reclaimable sandbox (of `uid`, or of anyone)."""
        idle_since = time.time() - _EVICTION_GRACE_S
        candidates = [
            box
            for box in self.all()
            if box.spec.reclaimable
            and box.retired is None
            and box.running == 0
            and box.last_used_at <= idle_since
            and (uid is None or box.spec.uid == uid)
        ]
        return min(candidates, key=lambda box: box.last_used_at, default=None)

    def _reclaimable_soon(self, uid: int | None) -> bool:
        """Whether a reclaimable sandbox (of `uid`, or of anyone) is starting, busy, just used
        or being removed, or a warm one starting: one will free a place."""
        specs = [box.spec for box in (*self.all(), *self._retiring)] + self._being_started
        reclaimable = [spec for spec in specs if spec.reclaimable] + self.pool.filling
        return any(uid is None or spec.uid == uid for spec in reclaimable)

    def starting(self, session: str, spec: SandboxSpec) -> bool:
        """Whether a start of the session's sandbox for `spec` is under way."""
        lock = self._start_locks.get((session, spec))
        return lock is not None and lock.locked()

    def live(self, session: str, spec: SandboxSpec) -> BoxT | None:
        record = self._sessions.get(session)
        box = record.sandboxes.get(spec) if record is not None else None
        if box is None or not box.usable():
            return None
        return box

    def sandboxes_of(self, session: str) -> list[BoxT]:
        """The session's live sandboxes (none for an unknown session)."""
        record = self._sessions.get(session)
        boxes = record.sandboxes.values() if record is not None else ()
        return [box for box in boxes if box.usable()]

    def known(self, session: str) -> bool:
        """Whether the session has a sandbox or one is starting."""
        return session in self._sessions or any(key[0] == session for key in self._start_locks)

    def all(self) -> list[BoxT]:
        return [box for record in self._sessions.values() for box in record.sandboxes.values()]

    def infos(self) -> list[SessionInfo]:
        infos = []
        for session in self._sessions.values():
            boxes = list(session.sandboxes.values())
            infos.append(
                SessionInfo(
                    id=session.id,
                    containers=tuple(box.name for box in boxes),
                    created_at=session.created_at,
                    last_used_at=max((box.last_used_at for box in boxes), default=0.0),
                    running=sum(box.running for box in boxes),
                )
            )
        return infos

    async def close(self, session: str) -> bool:
        """Kill the session's commands and tear down its sandboxes, forget it if it was lost;
        False if it is unknown."""
        lost = await self.lost.clear(session)
        record = self._sessions.pop(session, None)
        if record is None:
            return lost is not None
        self._forget_start_locks(session)
        async with anyio.create_task_group() as removals:
            for box in list(record.sandboxes.values()):
                removals.start_soon(
                    self.retire, box, f"session {session} was closed while the command ran"
                )
        return True

    async def close_all(self, reason: str, *, lost: str | None = None) -> None:
        """Start no sandbox any more; retire every one (shielded: this is the way out);
        `lost`: what their sessions are told at their next start (a next daemon's)."""
        self.closing = True
        with anyio.CancelScope(shield=True):
            await self.pool.close()
            async with anyio.create_task_group() as removals:
                for box in self.all():
                    removals.start_soon(functools.partial(self.retire, box, reason, lost=lost))
            self._sessions.clear()

    def detach_all(self) -> list[BoxT]:
        """Start no sandbox any more, and let go of every one, warm ones included, without
        tearing any down: the backend leaves them to the next daemon."""
        self.closing = True
        boxes = [*self.all(), *self.pool.release()]
        self._sessions.clear()
        return boxes

    async def retire(self, box: BoxT, reason: str, *, lost: str | None = None) -> None:
        """Stop using a sandbox: fail its in-flight commands with `reason`, tear it down.
        `lost`: it ended without its caller asking (its container gone, its supervisor
        dead), and this is why: the session's next start is refused with it (LostSessions)."""
        if box.retired is not None:
            return
        box.retired = reason
        if lost is not None:
            await self.remember_lost(box.session, box.spec, lost, box.name)
        record = self._sessions.get(box.session)
        if record is not None and record.sandboxes.get(box.spec) is box:
            del record.sandboxes[box.spec]
            if not record.sandboxes:
                del self._sessions[box.session]
                self._forget_start_locks(box.session)
        self._retiring.add(box)
        try:
            await self._tear_down(box, reason)
        finally:
            self._retiring.discard(box)
            if box.slot is not None:
                box.slot.release()

    async def _start_warm(self, spec: SandboxSpec) -> BoxT:
        """A sandbox for the pool, holding its own place under the caps (TooManySessionsError
        when there is none: callers' starts come first, so the pool never waits for one)."""
        slot = self.slots.claim(spec.uid)
        try:
            started = await self._start(POOL_SESSION, spec)
        except BaseException:
            slot.release()
            raise
        started.slot = slot
        return started

    async def reap_idle(self) -> None:
        """Retire sandboxes without a command for idle_ttl_s, until cancelled."""
        interval = min(max(self._idle_ttl_s / 4, 0.05), 15.0)
        while True:
            await anyio.sleep(interval)
            now = time.time()
            for box in self.all():
                if box.running == 0 and now - box.last_used_at >= self._idle_ttl_s:
                    self._spawn(self.retire, box, f"idle for more than {self._idle_ttl_s:g} s")

    def _forget_start_locks(self, session: str) -> None:
        """Drop the session's idle start locks (one per spec it used) so they do not pile up."""
        for key in [key for key in self._start_locks if key[0] == session]:
            lock = self._start_locks[key]
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                del self._start_locks[key]


def shutting_down() -> BackendError:
    return BackendError(
        "the sandbox daemon is shutting down: retry once it is back", code="shutting_down"
    )
