"""Keeping a batch within the sandbox's session cap.

A batch runs no more tasks at once than the sandbox lets one caller hold sessions; and when
the sandbox is full all the same (another program of the same user holds sessions), a
command it refuses for that reason waits for a free session and is sent again: a full
sandbox delays a task, it never fails it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from logos.options import ExecOptions
from logos.result import Result
from logos.runners.base import Runner
from logos.runners.sandboxes import BatchSandboxKind

_FIRST_WAIT_S = 0.2
MAX_WAIT_S = 5.0
"""Between tries: a session may end at any moment, but hundreds of waiting tasks must not
flood the daemon."""
T = TypeVar("T")


def pool_size(workers: int, session_cap: int | None) -> int:
    """How many tasks run at once: the workers asked for, within the session cap."""
    return workers if session_cap is None else max(1, min(workers, session_cap))


async def retry_while_full(
    attempt: Callable[[], Awaitable[T]],
    full: Callable[[T], bool],
    on_full: Callable[[], None] | None = None,
) -> T:
    """`attempt()` again, with a growing pause, while what it gave says the sandbox is
    full; then what it gave."""
    wait = _FIRST_WAIT_S
    while True:
        outcome = await attempt()
        if not full(outcome):
            return outcome
        if on_full is not None:
            on_full()
        await anyio.sleep(wait)
        wait = min(wait * 2, MAX_WAIT_S)


class WaitWhenFull(Runner):
    """A sandbox runner whose commands wait while the sandbox refuses them for being full."""

    def __init__(
        self, runner: Runner, kind: BatchSandboxKind, on_full: Callable[[], None] | None = None
    ) -> None:
        self._runner = runner
        self._kind = kind
        self._on_full = on_full

    async def run(self, command: str, options: ExecOptions) -> Result:
        return await retry_while_full(
            lambda: self._runner.run(command, options), self._kind.refused_when_full, self._on_full
        )

    @property
    def inner(self) -> Runner:
        """The sandbox's own runner."""
        return self._runner

    async def prepare(self, options: ExecOptions) -> None:
        """The sandbox's own preparation: a full sandbox makes the first command wait (it is
        told why the preparation failed, which `refused_when_full` recognises)."""
        await self._runner.prepare(options)

    async def aclose(self) -> None:
        await self._runner.aclose()
