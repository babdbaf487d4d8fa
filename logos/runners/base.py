"""The runner protocol: the loop never knows whether it talks to bash or to a daemon."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from logos.closing import AsyncCloseable
from logos.options import ExecOptions
from logos.result import Result


@runtime_checkable
class Runner(AsyncCloseable, Protocol):
    """Runs one shell command and reports what happened, until it is closed.

    A runner never raises for a command's failure: a command that cannot start, times
    out or is refused comes back as a `Result` with `error`, `timed_out` or a status set.
    Cancellation (an anyio cancel scope) must kill what the runner started.

    Close a runner when done with it (`aclose()`, or `async with`): it kills what its
    commands left running and releases what it holds (a sandbox session, connections). A
    class that subclasses `Runner` explicitly gets the `async with` methods, and a `prepare()`
    that does nothing.
    """

    async def run(self, command: str, options: ExecOptions) -> Result: ...

    async def prepare(self, options: ExecOptions) -> None:
        """Get ready for commands run with `options` (e.g. start a sandbox's container), so
        that the first one does not wait for it. It may take as long as that takes: callers
        run it beside other work (the loop does, beside its first model request). It never
        raises for a failure: the first command reports it. By default there is nothing to
        prepare (bash on this machine is ready)."""
        return None

    async def aclose(self) -> None: ...
