"""What a caller must close when done with it (a runner, a provider): `aclose()`, or
`async with`, which closes it on the way out; and `close_bounded`, how a run's end closes
them: shielded from the cancellation that may be ending it, and within a bound."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol, Self

import anyio

CLOSE_TIMEOUT_S = 30.0
"""At most this long to close each thing a run used (kill leftover jobs, end a sandbox session,
close a provider). WHY 30 s: ending a session removes its container, which takes seconds on
an engine a batch loads with many; a close cut short leaves the session to the daemon's
idle reaping."""


class AsyncCloseable(Protocol):
    """Has `aclose()`; a class that subclasses it explicitly gets `async with` from here."""

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


async def close_bounded(*closers: Callable[[], Awaitable[None]]) -> None:
    """Call each `aclose`, in order, each within CLOSE_TIMEOUT_S, all shielded from a
    cancellation: a cancelled run still kills what it left running, what cannot be closed
    does not hold its caller forever, and the next is closed also when one hangs or fails
    (a failure is raised once all were tried)."""
    with anyio.CancelScope(shield=True):
        async with contextlib.AsyncExitStack() as stack:
            for close in reversed(closers):
                stack.push_async_callback(_within_bound, close)


async def _within_bound(close: Callable[[], Awaitable[None]]) -> None:
    with anyio.move_on_after(CLOSE_TIMEOUT_S):
        await close()
