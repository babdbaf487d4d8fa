"""Notes under blocks whose command fell into a well-known trap of the shell.

Small models pick a tool by its name and trust what it prints: `sum` for a total (it prints
a checksum), `mkdir a/b` for a nested directory (it stops at the missing parent),
`wc -w essay.txt > count.txt` for a file that holds the count (wc writes the file's name
after it), `head -n 40 logs/` to look into a directory (it reads files only). They then
report the checksum as the total, say the directory cannot be made, or answer "logs/" for
the largest file in it. A note under the
block says what went wrong in one sentence, and a command that succeeded into a trap does
not count as the run having acted (the loop asks for another block, as after a failure).

Each trap is recognised from the command and its result alone, never from the task, so the
notes are the same for any task and any model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from logos.protocol.notices import (
    MKDIR_PARENTS_NOTE,
    SUM_IS_A_CHECKSUM_NOTE,
    WC_NAMES_THE_FILE_NOTE,
    read_a_directory_note,
    run_instead,
)
from logos.result import Result

_COMMAND_WORD = r"(?:^|[|;&(]|\$\(|\bthen|\bdo|\bxargs)\s*"
"""Where a program's name stands in a command line: first, or after a pipe, a separator, a
subshell or `xargs`."""
_SUM = re.compile(_COMMAND_WORD + r"sum(?:\s|$|[|;&)])", re.MULTILINE)
_MKDIR_MISSING_PARENT = re.compile(
    r"^mkdir: cannot create directory .*: No such file or directory$", re.MULTILINE
)
_PLAIN_ARGUMENTS = r"(?!-)[^\n;&|<>$`()\\]*?"
"""Operands with no option and nothing the shell would expand, redirect or chain."""
_LONE_MKDIR = re.compile(rf"\s*mkdir\s+({_PLAIN_ARGUMENTS})\s*")
_LONE_SUM = re.compile(rf"\s*sum\s+({_PLAIN_ARGUMENTS})\s*")
_PIPED_INTO_SUM = re.compile(r"(.*?[^\s|])\s*\|\s*sum\s*", re.DOTALL)
_CAT_ONE = re.compile(r"\s*cat\s+([^\s;&|<>$`()\\-][^\s;&|<>$`()\\]*)\s*")
ADD_UP = "awk '{s += $1} END {print s}'"
"""The addition the sum command was taken for."""
_COUNTED_INTO_FILE = re.compile(
    rf"\s*wc((?:\s+-[lwcm]+)+)\s+({_PLAIN_ARGUMENTS}\S)\s*>\s*({_PLAIN_ARGUMENTS}\S)\s*"
)
"""`wc -l notes.txt > count.txt`: one file counted, the count written into a file."""
_READ_A_DIRECTORY = re.compile(
    r"^[\w.-]+: (?:error reading |read failed: )?'?([\w./-]+?)'?: Is a directory$", re.MULTILINE
)
"""What head, tail, cat, wc, grep, sort and nl say when given a directory to read."""


@dataclass(frozen=True)
class Pitfall:
    note: Callable[[Result], str]
    fell_in: Callable[[Result], bool]
    instead: Callable[[Result, Sequence[Result]], str | None]
    """The command as meant, when it has a shape simple enough to rewrite surely (given
    the other results of its reply).

    WHY: a small model told what went wrong often fails to act on it; one handed the very
    command copies it (as the policy does for `sed -i`), and the fix stays visible."""


def _mkdir_with_parents(result: Result, _beside: Sequence[Result]) -> str | None:
    lone = _LONE_MKDIR.fullmatch(result.command)
    return f"mkdir -p {lone.group(1)}" if lone else None


def _added_up(result: Result, beside: Sequence[Result]) -> str | None:
    command = result.command
    if lone := _LONE_SUM.fullmatch(command):
        return f"{ADD_UP} {lone.group(1)}"
    if piped := _PIPED_INTO_SUM.fullmatch(command):
        return f"{piped.group(1)} | {ADD_UP}"
    if command.strip() == "sum":
        # WHY: a `sum` of nothing beside a `cat` of one file (the default model's
        # `cat prices.txt` and `sum`) meant that file.
        shown = {m.group(1) for r in beside if (m := _CAT_ONE.fullmatch(r.command)) and r.ok}
        return f"{ADD_UP} {shown.pop()}" if len(shown) == 1 else None
    return None


def _counted_from_stdin(result: Result, _beside: Sequence[Result] = ()) -> str | None:
    counted = _COUNTED_INTO_FILE.fullmatch(result.command)
    if counted is None or " " in counted.group(2).strip():
        return None
    options, counted_file, target = counted.groups()
    return f"wc{options} < {counted_file} > {target}"


def _names_into_file(result: Result) -> bool:
    return _counted_from_stdin(result) is not None


def _directories_read(result: Result) -> list[str]:
    """The directories a command tried to read as files, as its error names them."""
    if result.ok:
        return []
    return list(dict.fromkeys(m.group(1) for m in _READ_A_DIRECTORY.finditer(result.stderr)))


def _listed_instead(result: Result, _beside: Sequence[Result]) -> str | None:
    directories = _directories_read(result)
    return f"ls -lS {directories[0]}" if len(directories) == 1 else None


def _fixed(note: str) -> Callable[[Result], str]:
    return lambda _result: note


_PITFALLS = (
    Pitfall(
        _fixed(MKDIR_PARENTS_NOTE),
        lambda result: bool(_MKDIR_MISSING_PARENT.search(result.stderr)),
        _mkdir_with_parents,
    ),
    Pitfall(
        _fixed(SUM_IS_A_CHECKSUM_NOTE),
        lambda result: bool(_SUM.search(result.command)),
        _added_up,
    ),
    Pitfall(_fixed(WC_NAMES_THE_FILE_NOTE), _names_into_file, _counted_from_stdin),
    Pitfall(
        lambda result: read_a_directory_note(_directories_read(result)),
        lambda result: bool(_directories_read(result)),
        _listed_instead,
    ),
)


def pitfall_note(result: Result, beside: Sequence[Result] = ()) -> str | None:
    """The note for the trap `result`'s command fell into, if any; `beside`: the other
    results of its reply."""
    if result.job is not None:
        return None  # it has not ended: what it printed so far says nothing yet
    notes = []
    for pitfall in _PITFALLS:
        if pitfall.fell_in(result):
            note = pitfall.note(result)
            instead = pitfall.instead(result, beside)
            notes.append(note if instead is None else f"{note} {run_instead(instead)}")
    return " ".join(notes) or None


def pitfall_notes(results: Sequence[Result]) -> dict[int, str]:
    """The notes for one turn's results, by position in `results`."""
    return {i: note for i, result in enumerate(results) if (note := pitfall_note(result, results))}


def rewritten(command: str) -> str | None:
    """`command` as a pitfall's rule would rewrite it, if one would."""
    ran = Result(command=command, exit_code=0)
    return next((instead for p in _PITFALLS if (instead := p.instead(ran, ())) is not None), None)
