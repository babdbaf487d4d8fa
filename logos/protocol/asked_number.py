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
(`logos.agent.checks.worked_out`). And a bare number asked again under the number grammar
that no output shows gives way to the one number the outputs hold alone
(`logos.agent.checks.answer_form`).

A command to run is handed over only when it is surely what the model meant (`offered`): its
own last command showed a file of one number per line (`cat numbers.txt`), and the question
asks for their largest, smallest, average, sum or count (`sort -n numbers.txt | tail -n 1`);
or it showed a file of one thing per line and the question asks how many different ones
(`sort -u colours.txt | wc -l`); or it listed one line per thing the question counts (a
`grep` of matching lines, a `find`, a bare `ls`), and the count of those lines is the
answer; or, asked how many files, it named them by one pattern (`wc -l data/*.csv`), and
the count of the names the pattern matches is the answer (`ls -d data/*.csv | wc -l`); or,
asked for a count of several files together, it counted each (`wc -l a.txt b.txt`), and the
count of their lines run together is the answer (`cat a.txt b.txt | wc -l`: a small model
asked how many lines two files have together read one file's count off `wc`'s three lines).

Asked for the total, average, largest or smallest of a column of a CSV file a command
showed, with its header naming the column, the command that works it out takes that column
(`awk -F, 'NR > 1 {print $2}' stock.csv | awk '{s += $1} END {print s}'`): the default model
summed the fourth field of a file of two, then read "14 + 23 + 8 + 41 = 124". A number
such a question is answered from is one a command that splits the lines on their commas
printed: asked for the average of a column, the model's `awk '{sum += $3} END {print sum /
NR}' results.csv` printed 0, and it answered with a number of the file.

Asked how many files of one kind ("how many .json files are in the config directory"), the
command counts the names of that ending in the directory the task names, whatever the model
ran (`ls -d config/*.json | wc -l`): sent to a directory listed by size, the default model
answered 1 for three.

Asked on which line of a file a word is, the number is the one a command that numbers lines
printed for the one line it showed (`grep -n refund ledger.txt` → `3:refund 25`), and the
command handed over prints it alone (`grep -n refund ledger.txt | cut -d: -f1`): the default
model ran `grep refund ledger.txt`, saw `refund 25`, and answered "line 25".

A part of a file shown as it is (`head -n 1 scores.txt`) works out no largest, smallest,
average, sum or count, though it may print one number: asked for the largest number in a
file, the default model ran `head -n 1` and answered the first.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from logos.protocol.answer_form import NUMBER_IN_TEXT, requested_form
from logos.protocol.pitfalls import ADD_UP
from logos.protocol.task_directory import files_of_kind, named_directory
from logos.protocol.task_files import FILE_NAME, WC_OPTIONS, files_to_write
from logos.result import Result

_ASKS = re.compile(
    r"\bhow\s+(?:many|much)\b"
    r"|\bwhat\s+(?:is|are|was)\s+the\s+(?:sum|total|count|average|mean|largest|smallest"
    r"|biggest|highest|lowest|greatest|maximum|minimum)\b"
    r"|\b(?:add|sum)\s+up\b",
    re.IGNORECASE,
)
_ASKS_LINE = re.compile(r"\b(?:which|what)\s+line\b|\bline\s+number\b", re.IGNORECASE)
"""A question that asks on which line of a file something is."""
_NUMBERS_LINES = re.compile(
    r"\bgrep\b(?:\s+-\w+)*\s+-\w*n|\bnl\b|\bcat\s+-\w*n|\bsed\s+-n\s+\S*=|\bawk\b.*\bNR\b"
)
"""A command that prints the numbers of the lines it shows: `grep -n`, `nl`, `cat -n`."""
_LINE_NUMBER = re.compile(r"\s*(\d+)(?:[:\t ]|\s*$)")
_LINE_SOUGHT = re.compile(
    r"(?:\bthe\s+(?:word|text|string|name)\s+[\"'`]?|[\"'`])(?P<word>[\w.@-]+)", re.IGNORECASE
)
_COUNTS_KIND = re.compile(r"\bhow\s+many\s+(\.\w+)\s+files\b", re.IGNORECASE)
"""A count of the files of one kind, by their ending: "how many .json files"."""
_COUNTS_FILES = re.compile(r"\bhow\s+many\b[^?\n]*\bfiles\b", re.IGNORECASE)
_GLOB = re.compile(r"(?<![^\s])[\w./-]*[*?][\w./*?-]*(?![^\s;&|<>])")
"""An unquoted file-name pattern the shell expands (`data/*.csv`)."""
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


_SHOWS_ONE_FILE = re.compile(r"\s*(?:cat|head(?:\s+-n\s*\d+|\s+-\d+)?)\s+([\w./-]*\w)\s*")
"""A command that shows one file as it is (`cat numbers.txt`, `head -n 40 numbers.txt`)."""
_SHOWS_PART = re.compile(r"\s*(?:head|tail)\s+(?:-n\s*\d+|-\d+)\s+[\w./-]*\w\s*")
"""A command that shows a part of one file as it is (`head -n 1 scores.txt`)."""
_COUNTS_EACH = re.compile(r"\s*wc\s+(-[lwcm])((?:\s+[\w./-]*\w){2,})\s*")
"""`wc` counting several files, each on a line, then their total (`wc -l a.txt b.txt`)."""
_SPLITS_COMMAS = re.compile(r"-F\s*['\"]?,|-d\s*['\"]?,|\bFS\s*=\s*['\"],|\bimport\s+csv\b")
"""A command that splits a line on its commas (`awk -F,`, `cut -d,`, Python's csv)."""
_UNIT = re.compile(r"\b(lines|words|characters)\b", re.IGNORECASE)
"""What a count asks for, when it says: asked how many words two files have in all, the
default model counted their lines, and a count handed over with its flag would too."""
_COLUMN = re.compile(r"\bthe\s+([\w-]+)\s+column\b", re.IGNORECASE)
_TOGETHER = re.compile(
    r"\b(?:together|in\s+all|altogether|combined|in\s+total|total\s+(?:number|count))\b",
    re.IGNORECASE,
)
_BARE = re.compile(r"-?\d+(?:\.\d+)?")
_DIFFERENT = re.compile(r"\bhow\s+many\s+(?:different|distinct|unique)\b", re.IGNORECASE)


def _asking(words: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{words})\b", re.IGNORECASE)


_OF_NUMBERS = (
    (_asking("largest|biggest|highest|greatest|maximum"), "sort -n", " | tail -n 1"),
    (_asking("smallest|lowest|minimum"), "sort -n", " | head -n 1"),
    (_asking("average|mean"), "awk '{s += $1} END {print s / NR}'", ""),
    (_asking("sum|total|add\\s+up|added\\s+up|altogether"), ADD_UP, ""),
    (_asking("how\\s+many"), "wc -l <", ""),
)
"""What a question asks of a file of one number per line, and the command that works it out
(the file goes between the two parts)."""


_ECHOED = re.compile(r"\s*(?:echo|printf)\s[^$`|;&<>()]*")
"""A command that only prints the words it was given: no number it prints was worked out.
Sent back to work a total out, the default model ran `echo 14`."""


def asks_for_number(task: str) -> bool:
    """Whether `task` asks for a number as its answer (module docstring); not when it asks
    for a file to be written (the number goes there: `logos.protocol.task_files`)."""
    if files_to_write(task):
        return False
    form = requested_form(task)
    asks = _ASKS.search(task) or _ASKS_LINE.search(task)
    return (form is not None and form.kind == "number") or asks is not None


def lone_numbers(results: Sequence[Result], task: str) -> list[str]:
    """The numbers that outputs of commands that worked hold alone, one per such output, in
    the order they ran (a value may be there more than once); not a number a part of a file
    shows when `task` asks for what only the whole file works out (module docstring)."""
    alone = []
    whole = any(asks.search(task) for asks, _, _ in _OF_NUMBERS)
    line_asked = _ASKS_LINE.search(task) is not None
    column_asked = _COLUMN.search(task) is not None
    for result in results:
        # WHY exit code 1 without an error: `grep -c` prints 0 and exits 1 when no line matched.
        if not (result.ok or (result.exit_code == 1 and not result.stderr.strip())):
            continue
        if _ECHOED.fullmatch(result.command):
            continue
        if whole and _SHOWS_PART.fullmatch(result.command):
            continue
        if column_asked and not _SPLITS_COMMAS.search(result.command):
            continue
        if line_asked:
            numbered = _LINE_NUMBER.match(result.stdout)
            one_line = len(_lines(result.stdout)) == 1
            if _NUMBERS_LINES.search(result.command) and numbered and one_line:
                alone.append(numbered.group(1))
            continue
        numbers = NUMBER_IN_TEXT.findall(result.stdout)
        if len(numbers) == 1:
            alone.append(numbers[0])
    return alone


def offered(task: str, results: Sequence[Result]) -> str | None:
    """The command that works out the number `task` asks for from the model's last command
    that worked, when that is surely what the model meant (module docstring); else None."""
    if _ASKS_LINE.search(task):
        return _line_of(task)
    column = _column(task, results)
    if column is not None:
        return column
    kind = _COUNTS_KIND.search(task)
    if kind is not None:
        return f"ls -d {files_of_kind(named_directory(task), kind.group(1))} | wc -l"
    last = next((result for result in reversed(results) if result.ok), None)
    if last is None or "\n" in last.command.strip():
        return None
    command, lines = last.command.strip(), _lines(last.stdout)
    shown = _SHOWS_ONE_FILE.fullmatch(command)
    numbers = bool(lines) and all(_BARE.fullmatch(line.strip()) for line in lines)
    if shown is not None and numbers and (len(lines) > 1 or _SHOWS_PART.fullmatch(command)):
        return _worked_out(task, shown.group(1))
    if len(lines) < 2:
        return None
    each = _COUNTS_EACH.fullmatch(command)
    if each is not None and _TOGETHER.search(task):
        unit = _UNIT.search(task)
        counts = each.group(1) if unit is None else WC_OPTIONS[unit.group(1).lower()]
        return f"cat{each.group(2)} | wc {counts}"
    if _COUNTS_THINGS.search(task) is None:
        return None
    if shown is not None and _DIFFERENT.search(task):
        return f"sort -u {shown.group(1)} | wc -l"
    patterns = set(_GLOB.findall(command))
    if _COUNTS_FILES.search(task) and len(patterns) == 1:
        return f"ls -d {patterns.pop()} | wc -l"
    return f"{command} | wc -l" if _LISTS_LINES.fullmatch(command) else None


def _worked_out(task: str, numbers_file: str) -> str | None:
    """The command that works out what `task` asks of a file of one number per line."""
    return next(
        (
            f"{command} {numbers_file}{after}"
            for asks, command, after in _OF_NUMBERS
            if asks.search(task)
        ),
        None,
    )


def _column(task: str, results: Sequence[Result]) -> str | None:
    """The command that works out what `task` asks of a column it names ("the quantity
    column") of a CSV file a command showed with its header, the latest such file."""
    named = _COLUMN.search(task)
    if named is None:
        return None
    asked = next(
        (f"{command}{after}" for asks, command, after in _OF_NUMBERS if asks.search(task)), None
    )
    if asked is None or asked.endswith("<"):
        return None
    for result in reversed(results):
        shown = _SHOWS_ONE_FILE.fullmatch(result.command)
        header = result.stdout.lstrip().partition("\n")[0].lower().split(",")
        if result.ok and shown is not None and named.group(1).lower() in header:
            field = header.index(named.group(1).lower()) + 1
            return f"awk -F, 'NR > 1 {{print ${field}}}' {shown.group(1)} | {asked}"
    return None


def _line_of(task: str) -> str | None:
    """The command that prints alone the number of the line of the file `task` names that
    holds the word it names ("On which line of ledger.txt does the word refund appear?")."""
    word, file = _LINE_SOUGHT.search(task), re.search(FILE_NAME, task)
    if word is None or file is None:
        return None
    return f"grep -n {shlex.quote(word.group('word'))} {file.group(1)} | cut -d: -f1"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]
