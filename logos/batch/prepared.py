"""One sandbox session prepared once for a whole batch (`logos batch --prepare`).

The preparation (installing what every task needs, say) runs once, in a session of its own
that mounts no path; each task's session is then a fork of it: a copy of what the
preparation changed outside the mounts (its /tmp and $HOME), with the task's workspace
mounted. A sandbox removes sessions that idle too long: a fork that finds the prepared
session gone prepares it again, once for all the tasks that found it gone.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import anyio

from logos.batch.sandbox_slots import WaitWhenFull, retry_while_full
from logos.batch.settings import BatchSandbox
from logos.closing import AsyncCloseable
from logos.options import ExecOptions
from logos.protocol.envelope import format_results
from logos.result import Result
from logos.runners.base import Runner
from logos.runners.sandboxes import ForkingSandboxKind

_OUTPUT_CHARS = 2000
"""Of a failed preparation's output, the end shown in its error."""


class PrepareError(Exception):
    """The preparation failed; the message says how, with the end of its output."""


class PreparedSession(AsyncCloseable):
    """The batch's prepared session: `start` it once, `fork` it for each task."""

    def __init__(
        self,
        kind: ForkingSandboxKind,
        sandbox: BatchSandbox,
        command: str,
        options: ExecOptions,
        on_full: Callable[[], None] | None = None,
    ) -> None:
        """`options`: the preparation's (no paths: each task mounts its own workspace)."""
        self._kind = kind
        self._settings = dataclasses.replace(sandbox.settings, session=None, allowed_paths=())
        self._command = command
        self._options = options
        self._on_full = on_full
        self._runner: Runner | None = None
        self._lock = anyio.Lock()
        self.duration_s = 0.0
        """How long the last preparation took."""

    async def start(self) -> None:
        """Run the preparation in a new session. Raises PrepareError."""
        async with self._lock:
            await self._prepare()

    async def fork(self, options: ExecOptions) -> Runner:
        """A runner of a new session holding a copy of the prepared one, its commands run
        with `options`. Waits while the sandbox is full; prepares again (once) when the
        prepared session is gone. Raises PrepareError, or ValueError when the sandbox
        will not fork (the message says why)."""
        prepared_again = False
        while True:
            runner = self._runner
            if runner is None:
                raise PrepareError("the batch's session is not prepared (it failed, or closed)")
            forked = await retry_while_full(
                functools.partial(self._kind.fork, runner, options),
                self._refused_when_full,
                self._on_full,
            )
            if not isinstance(forked, Result):
                return WaitWhenFull(forked, self._kind, self._on_full)
            if not self._kind.lost_session(forked) or prepared_again:
                raise ValueError(f"cannot fork the batch's prepared session: {forked.error}")
            prepared_again = True
            async with self._lock:
                if self._runner is runner:  # not prepared again by another task meanwhile
                    await self._prepare()

    def _refused_when_full(self, forked: Runner | Result) -> bool:
        return isinstance(forked, Result) and self._kind.refused_when_full(forked)

    async def aclose(self) -> None:
        async with self._lock:
            await self._close_runner()

    async def _prepare(self) -> None:
        await self._close_runner()
        started = time.monotonic()
        runner = WaitWhenFull(self._kind.open(self._settings), self._kind, self._on_full)
        try:
            result = await runner.run(self._command, self._options)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await runner.aclose()
            raise
        self.duration_s = time.monotonic() - started
        if not result.ok:
            with anyio.CancelScope(shield=True):
                await runner.aclose()
            text = format_results([result])
            tail = text if len(text) <= _OUTPUT_CHARS else "…" + text[-_OUTPUT_CHARS:]
            raise PrepareError(f"the preparation {self._command!r} failed: {tail}")
        # WHY the runner inside: forks are asked of the kind's own runner.
        self._runner = runner.inner

    async def _close_runner(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            with anyio.CancelScope(shield=True):
                await runner.aclose()
