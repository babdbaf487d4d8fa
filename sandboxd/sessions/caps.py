"""Caps on live sandbox containers, in total and per caller, and the slots that keep to them.

WHY: every container may hold `limits.pids` processes and `limits.memory` bytes. Without a
cap, one caller can start containers until the host has no pid left (64 containers at the
default 512 pids use up a pid_max of 32768) or its memory is promised many times over. A
start takes its slot before anything is created, so concurrent starts cannot both pass a
cap; the slot is given back once the container is removed.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sandboxd.api import API_PREFIX
from sandboxd.backend import TooManySessionsError

_PID_MAX_FILE = Path("/proc/sys/kernel/pid_max")
_MEMINFO_FILE = Path("/proc/meminfo")
_MIN_TOTAL = 4
"""Even a small host runs a few sessions: the limits are ceilings, rarely what commands use."""
_MEMORY_OVERCOMMIT = 2
"""Containers' memory limits may add up to this many times the host's memory."""


@dataclass(frozen=True)
class HostFigures:
    """What bounds the containers a host can carry; None where it could not be read."""

    pid_max: int | None
    memory_bytes: int | None

    @classmethod
    def read(cls) -> HostFigures:
        return cls(pid_max=_read_pid_max(), memory_bytes=_read_mem_total())


@dataclass(frozen=True)
class SessionCaps:
    total: int
    """Sandbox containers of all callers together (starting and closing ones included)."""
    per_caller: int
    """Sandbox containers of one caller (uid)."""
    basis: str
    """How the figures were chosen, for the daemon's log."""
    wait_s: float = 60.0
    """How long a new sandbox waits for a reclaimable one (a temenos caller's) to go idle
    when the caps are full of them, before it is refused."""

    @classmethod
    def derive(
        cls,
        *,
        pids: int,
        memory_bytes: int,
        total: int | None = None,
        per_caller: int | None = None,
        host: HostFigures | None = None,
    ) -> SessionCaps:
        """The set caps; an unset total follows the host, an unset per-caller cap is 3/4 of
        the total (room for another caller)."""
        if total is None:
            total, why = _host_total(pids, memory_bytes, host or HostFigures.read())
            basis = f"max_sessions from the host: {why}"
        else:
            basis = "max_sessions from the config"
        if per_caller is None:
            per_caller = max(1, total * 3 // 4)
            basis += "; max_sessions_per_caller 3/4 of it"
        else:
            basis += "; max_sessions_per_caller from the config"
        return cls(total=total, per_caller=per_caller, basis=basis)

    def describe(self) -> str:
        return f"at most {self.total} sandbox containers, {self.per_caller} per caller"


CapScope = Literal["caller", "total"]
"""The cap a new container would pass: its caller's (max_sessions_per_caller) or the total."""


class SessionSlot:
    """One container's place under the caps, from before its start until its removal."""

    def __init__(self, give_back: Callable[[], None]) -> None:
        self._give_back: Callable[[], None] | None = give_back

    def release(self) -> None:
        """Give the place back (once, however often it is called)."""
        give_back, self._give_back = self._give_back, None
        if give_back is not None:
            give_back()


class SessionSlots:
    """Counts the containers each caller has running or starting; refuses one over a cap."""

    def __init__(self, caps: SessionCaps) -> None:
        self.caps = caps
        self._held: Counter[int] = Counter()

    @property
    def in_use(self) -> int:
        return self._held.total()

    def full_for(self, uid: int) -> CapScope | None:
        """Which cap a new container of `uid` would pass: its own, the total, or neither."""
        if self._held[uid] >= self.caps.per_caller:
            return "caller"
        if self.in_use >= self.caps.total:
            return "total"
        return None

    def claim(self, uid: int) -> SessionSlot:
        """A place for one more container of `uid`; TooManySessionsError over a cap."""
        close_hint = (
            f"close sessions no longer needed (DELETE {API_PREFIX}/sessions/{{id}}; GET "
            f"{API_PREFIX}/sessions lists yours) or raise"
        )
        held = self._held[uid]
        if held >= self.caps.per_caller:
            raise TooManySessionsError(
                f"uid {uid} already has {_containers(held)} (starting and closing ones "
                f"included), the most max_sessions_per_caller = {self.caps.per_caller} "
                f"allows: {close_hint} max_sessions_per_caller in the daemon's config"
            )
        if self.in_use >= self.caps.total:
            raise TooManySessionsError(
                f"the daemon already has {_containers(self.in_use)} (starting and closing ones "
                f"included), the most max_sessions = {self.caps.total} allows: {close_hint} "
                "max_sessions in the daemon's config"
            )
        return self.hold(uid)

    def hold(self, uid: int) -> SessionSlot:
        """A place for a container of `uid` that exists already (one a daemon before this one
        left running), over the caps if need be: it counts, so new ones wait for room."""
        self._held[uid] += 1
        return SessionSlot(functools.partial(self._give_back, uid))

    def _give_back(self, uid: int) -> None:
        self._held[uid] -= 1
        if self._held[uid] <= 0:
            del self._held[uid]


def _containers(count: int) -> str:
    return f"{count} sandbox container" + ("" if count == 1 else "s")


def _host_total(pids: int, memory_bytes: int, host: HostFigures) -> tuple[int, str]:
    """max(MIN_TOTAL, the fewer of: 3/4 of pid_max over the pids limit, MEMORY_OVERCOMMIT
    times the host's memory over the memory limit), with the reasoning."""
    bounds: list[int] = []
    reasons: list[str] = []
    if host.pid_max is not None:
        bounds.append(host.pid_max * 3 // 4 // pids)
        reasons.append(f"3/4 of pid_max {host.pid_max} at {pids} pids each allows {bounds[-1]}")
    if host.memory_bytes is not None:
        bounds.append(_MEMORY_OVERCOMMIT * host.memory_bytes // memory_bytes)
        reasons.append(
            f"{_MEMORY_OVERCOMMIT} times {host.memory_bytes / 1024**3:.1f} GiB of memory at "
            f"{memory_bytes / 1024**3:.2g} GiB each allows {bounds[-1]}"
        )
    if not reasons:
        reasons.append(f"neither {_PID_MAX_FILE} nor {_MEMINFO_FILE} could be read")
    total = max(_MIN_TOTAL, min(bounds, default=_MIN_TOTAL))
    return total, "; ".join(reasons) + f"; at least {_MIN_TOTAL}"


def _read_pid_max() -> int | None:
    try:
        return int(_PID_MAX_FILE.read_text().strip())
    except (OSError, ValueError):
        return None


def _read_mem_total() -> int | None:
    try:
        for line in _MEMINFO_FILE.read_text().splitlines():
            name, _, value = line.partition(":")
            if name == "MemTotal":
                amount, _, unit = value.strip().partition(" ")
                return int(amount) * (1024 if unit == "kB" else 1)
    except (OSError, ValueError):
        return None
    return None
