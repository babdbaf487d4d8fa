"""A question that asks for a number, and whether a command's output holds one alone.

Measured with the default 0.5B model: asked "How many lines of app.log contain ERROR?", it ran
`grep ERROR app.log`, saw the four lines, and answered "2"; asked "How many .csv files are in
the data directory?", it ran `wc -l data/*.csv` (two lines in each of four files, then their
total) and answered "2". It does not count what it reads, and picks a number it sees. A
person who asks "how many" expects a count a command made, and the number grammar an
answer may be held to (`logos.protocol.answer_form`) glues the digits of several numbers
into one (`154282311`).

So a question asks for a number (`asks_for_number`) when it asks "how many" or "how much",
for the sum, total, count, average, largest or smallest of something, or for just the number
(`requested_form`). An output holds a number alone (`lone_numbers`) when it is the one number
a command that worked printed: `4`, `17 notes.txt`, `total: 107`; a listing of lines, or
several counts, holds none alone. Until an output holds one, the value is not worked out
(`logos.agent.checks.worked_out`). And when a bare number is asked and the answer lacks the
form, the one number the outputs hold alone is the answer, rather than the model asked again
under the number grammar (`logos.agent.checks.answer_form`).

A command to run is handed over only when it is surely what the model meant: its own last
command listed one line per thing the question counts (a `grep` of matching lines, a `find`,
a bare `ls`), and the count of those lines is the answer (`counted`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from logos.protocol.answer_form import NUMBER_IN_TEXT, requested_form
from logos.result import Result

_ASKS = re.compile(
    r"\bhow\s+(?:many|much)\b"
    r"|\bwhat\s+(?:is|are|was)\s+the\s+(?:sum|total|count|average|mean|largest|smallest"
    r"|biggest|highest|lowest|greatest|maximum|minimum)\b"
    r"|\b(?:add|sum)\s+up\b",
    re.IGNORECASE,
)
_COUNTS_THINGS = re.compile(r"\bhow\s+many\s+(?!words?\b|char|bytes?\b|letters?\b)", re.IGNORECASE)
"""A count of things a listing shows one per line (not of words, characters or bytes)."""
_LISTS_LINES = re.compile(
    r"\s*(?:grep(?!.*\s-[a-zA-Z]*[cnlLvqo])\s+(?:-[a-zA-Z]+\s+)*\S+\s+[\w./*][\w./*-]*"
    r"|find(?=.*\s-i?name\s)\s+[\w./*][\w./*-]*(?:\s+-(?:name|iname|type|maxdepth|mindepth)\s+\S+)*"
    r"|ls(?:\s+-[1ad]+)*(?:\s+[\w./*][\w./*-]*)*)\s*"
)
"""A command with no pipe, redirection or chain whose output is one line per thing found: a
`grep` of matching lines (no count, numbers, names, inversion), a `find` by name (which does
not list the directory it starts from), an `ls` that prints names alone."""


def asks_for_number(task: str) -> bool:
    """Whether `task` asks for a number as its answer (module docstring)."""
    form = requested_form(task)
    return (form is not None and form.kind == "number") or _ASKS.search(task) is not None


def lone_numbers(results: Sequence[Result]) -> list[str]:
    """The numbers that outputs of commands that worked hold alone, one per such output, in
    the order they ran (a value may be there more than once)."""
    alone = []
    for result in results:
        # WHY exit code 1 without an error: `grep -c` prints 0 and exits 1 when no line matched.
        if not (result.ok or (result.exit_code == 1 and not result.stderr.strip())):
            continue
        numbers = NUMBER_IN_TEXT.findall(result.stdout)
        if len(numbers) == 1:
            alone.append(numbers[0])
    return alone


def counted(task: str, results: Sequence[Result]) -> str | None:
    """The model's last command that worked, counted (`… | wc -l`), when the task counts
    things and that command listed them one per line (module docstring); else None."""
    if _COUNTS_THINGS.search(task) is None:
        return None
    last = next((result for result in reversed(results) if result.ok), None)
    if last is None or len(last.stdout.strip().splitlines()) < 2:
        return None
    command = last.command.strip()
    if "\n" in command or _LISTS_LINES.fullmatch(command) is None:
        return None
    return f"{command} | wc -l"
