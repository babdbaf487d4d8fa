"""Commands the loop answers itself, before the policy and the runner see them.

A family of such commands (the jobs' `jobs`, `wait %1`, `kill %1`; a server's memory notes)
says how it is used, in lines for the system prompt; which commands are its own (only a block
that is exactly one of them: the same words inside a script are the shell's); whether they
need the run's approval (`logos.approvals.approval` decides, as for any command); and answers
them with a `Result`, like a runner would. So they behave the same with local bash and in a sandbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from logos.options import ExecOptions
from logos.result import Result


class CommandFamily(Protocol):
    """Commands the loop answers itself; the block executor asks each family in turn."""

    @property
    def usage(self) -> Sequence[str]:
        """Lines for the system prompt: what the commands do, each shown with a harmless
        example."""
        ...

    @property
    def needs_approval(self) -> bool:
        """Whether each command is put to the run's approval first, as a shell command is."""
        ...

    def matches(self, command: str) -> bool:
        """Whether the whole block is one of this family's commands."""
        ...

    async def run(self, command: str, options: ExecOptions) -> Result:
        """Answer a command that `matches`; never raises for the command's own failure."""
        ...
