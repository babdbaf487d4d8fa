"""A request to a sandbox daemon that may be restarting: sent again while nothing listens
where it did, within a bound.

WHY only a refused (or missing) connection: such a request reached no daemon, so sending it
again runs nothing twice. A request that broke off after it was sent may have reached the
daemon that went away: what it did is unknown, and only its caller may decide (an idempotent
one, a job's state, may be asked again; a command is never run again unasked).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import httpx

RESTART_WAIT_S = 30.0
"""How long a daemon that went away is waited for (an upgrade, a crash and its restart)."""
_FIRST_PAUSE_S = 0.05
_MAX_PAUSE_S = 1.0

T = TypeVar("T")


def never_reached(exc: httpx.TransportError) -> bool:
    """Whether the request reached no daemon: its connection was refused or its socket is
    gone (not a timeout: a daemon that does not accept is overloaded, not restarting)."""
    return isinstance(exc, httpx.ConnectError)


async def through_restart(
    send: Callable[[], Awaitable[T]],
    *,
    again: Callable[[httpx.TransportError], bool] = never_reached,
    wait_s: float = RESTART_WAIT_S,
) -> T:
    """`send()`'s answer; while it fails in a way `again` accepts, it is sent again (pausing
    longer each time) until `wait_s` has passed, then the last failure is raised."""
    deadline = time.monotonic() + wait_s
    pause = _FIRST_PAUSE_S
    while True:
        try:
            return await send()
        except httpx.TransportError as exc:
            if not again(exc) or time.monotonic() + pause > deadline:
                raise
        await anyio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_S)
