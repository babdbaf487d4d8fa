"""Ctrl-C, SIGTERM and SIGHUP for a command that runs things: the first asks it to stop (it
kills what runs and keeps what was done), the second quits at once."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator, Callable

import anyio
from anyio.abc import TaskStatus

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.asynccontextmanager
async def stop_signals(
    received: list[int], first: Callable[[int], None] | None = None
) -> AsyncIterator[None]:
    """While the body runs, each stop signal is appended to `received`: the first calls
    `first` with its number, the second (or the first, without `first`) cancels the body."""
    with anyio.CancelScope() as body:
        async with anyio.create_task_group() as watchers:
            await watchers.start(_watch, received, first, body)
            yield
            watchers.cancel_scope.cancel()


async def _watch(
    received: list[int],
    first: Callable[[int], None] | None,
    body: anyio.CancelScope,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            received.append(signum)
            if first is None or len(received) > 1:
                body.cancel()
                return
            first(signum)
