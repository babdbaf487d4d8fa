"""Notes under blocks whose command fell into a well-known trap of the shell.

Small models pick a tool by its name and trust what it prints: `sum` for a total (it prints
a checksum), `mkdir a/b` for a nested directory (it stops at the missing parent). They then
report the checksum as the total, or say the directory cannot be made. A note under the
block says what went wrong in one sentence, and a command that succeeded into a trap does
not count as the run having acted (the loop asks for another block, as after a failure).

Each trap is recognised from the command and its result alone, never from the task, so the
notes are the same for any task and any model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from logos.protocol.notices import MKDIR_PARENTS_NOTE, SUM_IS_A_CHECKSUM_NOTE
from logos.result import Result

_COMMAND_WORD = r"(?:^|[|;&(]|\$\(|\bthen|\bdo|\bxargs)\s*"
"""Where a program's name stands in a command line: first, or after a pipe, a separator, a
subshell or `xargs`."""
_SUM = re.compile(_COMMAND_WORD + r"sum(?:\s|$|[|;&)])", re.MULTILINE)
_MKDIR_MISSING_PARENT = re.compile(
    r"^mkdir: cannot create directory .*: No such file or directory$", re.MULTILINE
)


@dataclass(frozen=True)
class Pitfall:
    note: str
    fell_in: Callable[[Result], bool]


PITFALLS = (
    Pitfall(MKDIR_PARENTS_NOTE, lambda result: bool(_MKDIR_MISSING_PARENT.search(result.stderr))),
    Pitfall(SUM_IS_A_CHECKSUM_NOTE, lambda result: bool(_SUM.search(result.command))),
)


def pitfall_note(result: Result) -> str | None:
    """The note for the trap `result`'s command fell into, if any."""
    if result.job is not None:
        return None  # it has not ended: what it printed so far says nothing yet
    notes = [pitfall.note for pitfall in PITFALLS if pitfall.fell_in(result)]
    return " ".join(notes) or None


def pitfall_notes(results: Sequence[Result]) -> dict[int, str]:
    """The notes for one turn's results, by position in `results`."""
    return {i: note for i, result in enumerate(results) if (note := pitfall_note(result))}
