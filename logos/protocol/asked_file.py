"""A task that asks which file: the one that holds a word, or the largest, smallest, newest
or oldest; the command that picks it out, and whether one did.

Measured with the default 0.5B model: asked "Which file in the notes directory contains the
word TODO?", it listed the directory, twice, and answered "README.md", a name no output
showed; asked which of the .txt files mentions banana, it named two of the three a listing
showed; asked which file in the recipes directory mentions cinnamon, it answered the first
name `ls -l` printed; asked which file in the logs directory is the largest, it read a
listing with sizes and named the smallest. Every try of these failed, the same way: a
file's name does not say what it holds, and a listing read by eye gives a name, not the
one asked for. A command that picks the file out does: a search, a listing sorted by size
or time cut to its first line. And once the search printed the one file, asked again from
all the outputs, the model named that file and another the listing had shown: the answer
is asked beside what the command printed.

So a task asks for a file (`asked_file`) when it asks which file (or files) contains,
mentions, defines, includes, uses or references a word, or has the word (the string, the
text) it names; or which file is the largest, biggest, smallest, newest, latest, most
recent or oldest. `AskedFile.command` picks it out, in the directory the task names ("in
the notes directory", "under src", none: here) and among the files it names ("the .txt
files"); `AskedFile.picked` is the command of the run that did (a search tool that ran on
the word and worked, found it or found nothing; a listing sorted by size or time that
printed one line). Until one did, an answer is not taken, and once one did, an answer asked
from the outputs is asked beside what it printed (`logos.agent.checks.asked_file`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from logos.protocol.task_directory import files_of_kind, named_directory
from logos.result import Result

__all__ = ["AskedFile", "asked_file"]

_HOLDS = re.compile(
    r"\b(?:which|what|find\s+(?:the|a|all|every|each))\s+(?:one\s+)?(?:of\s+the\s+)?"
    r"(?:(?P<ext>\.\w+)\s+)?files?\b(?P<between>[^?!\n]*?)\s"
    r"(?:(?P<verb>contains?|contained|mentions?|defines?|includes?|uses?|references?)"
    r"|(?:has|have|holds?)(?=\s+the\s+(?:word|string|text|phrase)\b))\s+"
    r"(?:the\s+(?P<kind>word|string|text|phrase|name|function|class|method|variable|"
    r"constant|setting|key)\s+)?"
    r"(?P<word>\"[^\"\n]+\"|'[^'\n]+'|`[^`\n]+`|[\w.:/-]*\w)",
    re.IGNORECASE,
)
""""Which file in the notes directory contains the word TODO", "Find the file under src that
defines format_price", "Which of the .txt files mentions banana"."""
_EXTREME_WORDS = (
    r"largest|biggest|smallest|newest|latest|oldest"
    r"|most\s+recent(?:ly\s+(?:modified|changed|written))?"
)
_EXTREME = re.compile(
    rf"\b(?:which|what)\s+(?:(?P<ext>\.\w+)\s+)?file\b(?P<between>[^?!\n]*?)\b(?:is|was)\s+"
    rf"(?:the\s+)?(?P<extreme>{_EXTREME_WORDS})\b"
    rf"|\b(?:which|what)\s+is\s+the\s+(?P<extreme_first>{_EXTREME_WORDS})\s+"
    rf"(?:(?P<ext_first>\.\w+)\s+)?file\b",
    re.IGNORECASE,
)
""""Which file in the logs directory is the largest", "What is the newest file in inbox"."""
_SORTED_BY = {"largest": "-S", "biggest": "-S", "smallest": "-Sr", "oldest": "-tr"}
"""The `ls` flags that put the file asked for first (newest, latest, most recent: `-t`)."""
_NOT_WORDS = frozenset(
    {"a", "an", "the", "it", "them", "that", "this", "these", "those", "most", "more", "least"}
)
"""What follows "contains" in a task that asks for something else ("which file contains the
most lines")."""
_DEFINES = re.compile(r"defines?|function|class|method", re.IGNORECASE)
_SEARCH_TOOL = re.compile(r"(?<![\w-])(?:grep|egrep|fgrep|rg|ag|ack|awk)(?![\w-])")
_SORTS = re.compile(r"(?<![\w-])ls\s(?:[^|;&]*\s)?-\w*[St]|(?<![\w-])(?:sort|du)(?![\w-])")
"""A command that orders files by size or time: `ls -S`, `ls -lt`, `sort`, `du`."""


@dataclass(frozen=True)
class AskedFile:
    """A file a task asks for: the one that holds `word`, or the `extreme` one; where to
    look, and how."""

    directory: str
    """"." when the task names none."""
    extension: str | None
    """Only the files with this ending (".txt"), when the task names one."""
    word: str | None = None
    definition: bool = False
    """The task asks where `word` is defined: the lines are shown, not only file names, so
    that a definition is told apart from a use."""
    extreme: str | None = None
    """"largest", "newest", …, when the task asks for a file by its size or time."""

    @property
    def asked(self) -> str:
        """What the task asks of the file, in words: "holds TODO", "is the largest"."""
        return f"holds {self.word}" if self.word is not None else f"is the {self.extreme}"

    @property
    def command(self) -> str:
        """The command that picks the file out (module docstring)."""
        files = None if self.extension is None else files_of_kind(self.directory, self.extension)
        if self.word is None:
            flags = _SORTED_BY.get((self.extreme or "").lower(), "-t")
            return f"ls {flags} {files or self.directory} | head -n 1"
        shows, word = "n" if self.definition else "l", shlex.quote(self.word)
        if files is not None:
            return f"grep -{shows} {word} {files}"
        # WHY: a search of the whole checkout would list git's own files beside the work.
        skip = " --exclude-dir=.git" if self.directory == "." else ""
        return f"grep -r{shows}{skip} {word} {self.directory}"

    def picked(self, results: Sequence[Result]) -> Result | None:
        """The latest command of `results` that picked the file out (module docstring)."""
        return next((result for result in reversed(results) if self._picks(result)), None)

    def printed_names(self, result: Result) -> list[str]:
        """What `result` printed, when it printed file names alone (a search for names, a
        sorted listing cut to one line); [] for lines that show more (`grep -n`)."""
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        return [] if self.definition or any(":" in line for line in lines) else lines

    def files_picked(self, results: Sequence[Result]) -> list[str]:
        """The files the latest command that picked the file out printed, each once: the
        names a search or a listing printed, the files of the lines a search printed (for a
        definition, only those of lines that define the word: `def format_price(`)."""
        picked = self.picked(results)
        if picked is None:
            return []
        files = []
        for line in picked.stdout.splitlines():
            path, colon, rest = line.strip().partition(":")
            if colon and self.definition and self.word is not None:
                defines = rf"\b(?:def|class|function|func|fn)\s+{re.escape(self.word)}\b"
                if not re.search(defines, rest):
                    continue
            if path:
                files.append(path)
        return list(dict.fromkeys(files))

    def _picks(self, result: Result) -> bool:
        if self.word is None:
            lines = result.stdout.strip().splitlines()
            return result.ok and len(lines) == 1 and _SORTS.search(result.command) is not None
        return (
            self.word.lower() in result.command.lower()
            and _SEARCH_TOOL.search(result.command) is not None
            and (result.ok or (result.exit_code == 1 and not result.stderr.strip()))
        )


def asked_file(task: str) -> AskedFile | None:
    """The file `task` asks for (module docstring), or None."""
    holds = _HOLDS.search(task)
    if holds is not None:
        word = holds.group("word").strip("\"'`")
        if word.lower() in _NOT_WORDS or not word.strip():
            return None
        verb = holds.group("kind") or holds.group("verb") or ""
        return AskedFile(
            directory=named_directory(holds.group("between") + " " + task[holds.end() :]),
            extension=holds.group("ext"),
            word=word,
            definition=_DEFINES.fullmatch(verb) is not None,
        )
    extreme = _EXTREME.search(task)
    if extreme is None:
        return None
    return AskedFile(
        directory=named_directory(task[extreme.start() :]),
        extension=extreme.group("ext") or extreme.group("ext_first"),
        extreme=" ".join((extreme.group("extreme") or extreme.group("extreme_first")).split()),
    )
