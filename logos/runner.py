"""The runner protocol: the loop never knows whether it talks to bash or to a daemon."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from logos.options import ExecOptions
from logos.result import Result


@runtime_checkable
class Runner(Protocol):
    """Runs one shell command and reports what happened.

    A runner never raises for a command's failure: a command that cannot start, times
    out or is refused comes back as a `Result` with `error`, `timed_out` or a status set.
    Cancellation (an anyio cancel scope) must kill what the runner started.
    """

    async def run(self, command: str, options: ExecOptions) -> Result: ...
