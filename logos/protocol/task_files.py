"""The files a task asks to be written, and whether a command of the run wrote them.

Measured with the default 0.5B model on "Create a file count.txt that contains the number of
words in essay.txt, and nothing else": it ran `wc -w essay.txt`, then answered with a
paragraph showing the command that would write the file, and the file was never made. A
task that names a file to create or write is done when a command wrote it; an answer before
that is not the end (`logos.agent.checks.task_files`).

A file is named with its extension (`count.txt`), after "create a file (named)", after a
verb that writes (write, save, put, store) and the last "to", "in", "into" or "as" of its
sentence, or after a verb that copies (copy, move, rename) and its last "to", "into" or
"as". Written: a command that succeeded names it (a command that
only reads it counts too: a file the task reads is not one to write).

Told to write the file, the same model ran its commands again unchanged; handed the command,
it runs it. So the file is offered written from what the run's last command that worked a
value out printed (`wc -w essay.txt` → `wc -w < essay.txt > count.txt`), never from a
command that only lists or shows files. A file the task asks to be a copy of the file it
asks to find is offered copied from the one file a command picked out
(`logos.protocol.asked_file`). When no
command worked a value out (asked to count the lines of notes.txt into count.txt, the model
only showed the file with `head -n 40 notes.txt`, then answered "10"), it is offered from
what the task itself asks of a file it names: its lines, words or characters counted
(`wc -l < notes.txt > count.txt`), or its numbers added up; or, when the task gives what
the file is to hold word for word (quoted, or a JSON object), written with it.

A task may also ask for a file to be changed ("In greeting.txt, replace …"): a command that
only printed it changed has not changed it (`unmade_edit`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from logos.protocol.asked_file import asked_file
from logos.protocol.pitfalls import ADD_UP, rewritten
from logos.result import Result

FILE_NAME = r"([\w./-]*\w\.[A-Za-z0-9]{1,8})(?![\w/-]|\.\w)"
"""A file's name as a task writes it: with its extension; a full stop after it ends the
sentence."""
_FILE = FILE_NAME
_CREATED = re.compile(
    rf"\b(?:create|make)\s+(?:a|an|the)\s+(?:new\s+|empty\s+)?file\s+(?:named\s+|called\s+)?{_FILE}",
    re.IGNORECASE,
)
_ONLY_SHOWS = re.compile(r"\s*(?:ls|find|tree|du|cat|head|tail|nl|less|more|echo|pwd)\b")
"""A command whose output lists or repeats what is there, not a value worked out of it."""
_WRITES = re.compile(r">|\btee\b")
_WRITTEN = re.compile(
    rf"\b(?:write|save|put|store)\b[^?!\n]*\b(?:to|in|into|as)\s+{_FILE}", re.IGNORECASE
)
_COPIED = re.compile(rf"\b(?:copy|move|rename)\b[^?!\n]*\b(?:to|into|as)\s+{_FILE}", re.IGNORECASE)
_EDITED = re.compile(
    rf"^\s*in\s+{_FILE}\s*,"
    rf"|\b(?:change|edit|modify|update)\s+{_FILE}"
    rf"|\b(?:remove|delete)\b[^?!\n]*\bfrom\s+{_FILE}",
    re.IGNORECASE,
)
"""A file the task asks to be changed: "In greeting.txt, replace …", "Change guests.txt so
that …", "Remove the line … from list.txt"."""
_FILTERS = r"(?:sed|awk|tr|grep\s+(?:-[a-zA-Z]*\s+)*-[a-zA-Z]*v[a-zA-Z]*)"
"""Commands that print a file changed: sed, awk, tr, and grep -v (the lines it keeps)."""
_COUNT_ASKED = re.compile(
    rf"\b(?:count|number\s+of)\s+(?:the\s+)?(lines|words|characters)\s+(?:of|in)\s+{_FILE}",
    re.IGNORECASE,
)
_LITERAL = re.compile(
    rf"{_FILE}[^?!\n]*?\b(?:contains?|containing|holding|holds?|with)\s+(?:only\s+)?"
    r"(?:the\s+(?:text|line|word|string|json(?:\s+object|\s+array)?|content)\s*:?\s*)?"
    r"(?P<content>\{[^\n]*\}|\[[^\n]*\]|\"[^\"\n]+\"|'[^'\n]+')(?=[.!]?\s*$|[.,;]?\s)",
    re.IGNORECASE,
)
"""A file and what it is to hold, word for word: quoted, or a JSON object or array, the end
of its sentence or clause after it (a quote that ends before that, as in 'it's here', is
not the whole of it)."""
WC_OPTIONS = {"lines": "-l", "words": "-w", "characters": "-m"}
"""The `wc` option that counts each unit a task may ask for."""
_SUM_ASKED = re.compile(
    rf"\b(?:add\s+up|sum(?:\s+up)?|total\s+of)\s+the\s+numbers\s+(?:of|in)\s+{_FILE}",
    re.IGNORECASE,
)


def files_to_write(task: str) -> list[str]:
    """The files `task` asks to be created, written, copied or moved to, in the order it
    names them."""
    patterns = (_CREATED, _WRITTEN, _COPIED)
    found = [m.group(1) for pattern in patterns for m in pattern.finditer(task)]
    return list(dict.fromkeys(found))


def _holds_output(name: str, task: str) -> bool:
    """Whether `task` asks `name` to hold something worked out (created or written), not a
    copy of another file."""
    return any(m.group(1) == name for p in (_CREATED, _WRITTEN) for m in p.finditer(task))


def unwritten(task: str, results: Sequence[Result]) -> list[str]:
    """The files `task` asks for that no command of `results` that succeeded names."""
    commands = [result.command for result in results if result.ok]
    return [
        name
        for name in files_to_write(task)
        if not any(re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", c) for c in commands)
    ]


def offered_write(name: str, task: str, results: Sequence[Result]) -> str | None:
    """The command that writes into `name` what the run's last command that worked a value
    out printed: that command, its output redirected into the file, as the pitfall rules
    would rewrite it (`logos.protocol.pitfalls`); else what the task gives word for word, or
    the value it asks of a file it names. For a copy of a file (a command's output is not
    one), the `cp` of the one file a command picked out; None when there is nothing sure."""
    if not _holds_output(name, task):
        return _copy_of_the_file_asked(name, task, results)
    for result in reversed(results):
        command = result.command.strip()
        if not (result.ok and result.stdout.strip()) or "\n" in command:
            continue
        if _ONLY_SHOWS.match(command) or _WRITES.search(command):
            continue
        write = f"{command} > {name}"
        return rewritten(write) or write
    literal = _literal_content(name, task)
    if literal is not None:
        return f"echo {shlex.quote(literal)} > {name}"
    asked = _asked_of_a_file(task)
    return None if asked is None else f"{asked} > {name}"


def _literal_content(name: str, task: str) -> str | None:
    """What `task` asks `name` to hold, word for word, when it gives it quoted or as a JSON
    object or array: 'Create a file config.json that contains the JSON object
    {"debug": true}'.

    WHY: asked so, the default model ran `cat config.json`, three times, and explained how
    one would write the file."""
    for match in _LITERAL.finditer(task):
        if match.group(1) == name:
            content = match.group("content")
            return content[1:-1] if content[0] in "\"'" else content
    return None


def _copy_of_the_file_asked(name: str, task: str, results: Sequence[Result]) -> str | None:
    """The command that copies (moves) into `name` the file the task asks for and a command
    of the run picked out alone (`logos.protocol.asked_file`): "Find the file under src that
    defines format_price and copy it to price_backup.py", once `grep -rn format_price src`
    printed one file's definition, is `cp src/money.py price_backup.py`.

    WHY: told only that price_backup.py was not written yet, the default model searched
    for the name price_backup.py, twice, then explained how one would copy the file."""
    asked = asked_file(task)
    copied = next((m for m in _COPIED.finditer(task) if m.group(1) == name), None)
    if asked is None or copied is None:
        return None
    files = asked.files_picked(results)
    if len(files) != 1:
        return None
    verb = "cp" if copied.group(0).lower().startswith("copy") else "mv"
    return f"{verb} {shlex.quote(files[0])} {shlex.quote(name)}"


def _asked_of_a_file(task: str) -> str | None:
    """The command that works out the value `task` asks of a file it names: its lines, words
    or characters counted, or its numbers added up."""
    if counted := _COUNT_ASKED.search(task):
        return f"wc {WC_OPTIONS[counted.group(1).lower()]} < {counted.group(2)}"
    if added := _SUM_ASKED.search(task):
        return f"{ADD_UP} {added.group(1)}"
    return None


def unmade_edit(task: str, results: Sequence[Result]) -> tuple[str, str] | None:
    """The file `task` asks to be changed and the command that makes the change, when no
    command wrote the file and the run's last command that worked printed it changed
    (`sed 's/world/moon/' greeting.txt`): that command, its output moved over the file
    (`… > greeting.txt.new && mv greeting.txt.new greeting.txt`), as the refusal of
    `sed -i` offers it (`logos.approvals.policy`); else None.

    WHY: asked to replace a word in greeting.txt, the default model ran the sed that prints
    the changed text, and answered with it; the file was never changed."""
    edited = _EDITED.search(task)
    if edited is None:
        return None
    name = next(group for group in edited.groups() if group)
    named = re.escape(name)
    writes = re.compile(rf">>?\s*{named}(?![\w.-])|\b(?:mv|cp)\s.*\s{named}\s*$|\btee\b.*{named}")
    if any(result.ok and writes.search(result.command) for result in results):
        return None
    last = next((result for result in reversed(results) if result.ok), None)
    if last is None or not last.stdout.strip():
        return None
    command = last.command.strip()
    printed = re.fullmatch(rf"{_FILTERS}\s[^|;&>`$()\n]*?(?:<\s*)?{named}", command)
    if printed is None:
        return None
    return name, written_over(command, name)


def written_over(command: str, target: str) -> str:
    """`command`'s output moved over `target` through `target.new`: a file changed in a way
    a reviewer sees, unlike an in-place edit (`logos.approvals.policy` offers it for `sed -i`)."""
    new = shlex.quote(f"{target}.new")
    return f"{command} > {new} && mv {new} {shlex.quote(target)}"
