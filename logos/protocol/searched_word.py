"""A task that asks which file holds a word, and whether a command searched the files for it.

Measured with the default 0.5B model: asked "Which file in the notes directory contains the
word TODO?", it listed the directory, twice, and answered "README.md", a name no output
showed; asked which of the .txt files mentions banana, it named two of the three a listing
showed; asked which file in the recipes directory mentions cinnamon, it answered the first
name `ls -l` printed. Every try of these failed, the same way: a file's name does not say
what the file holds, and the model reads a listing as if it did. Only a search does.

So a task seeks a word (`sought_word`) when it asks which file (or files) contains,
mentions, defines, includes, uses or references it, or has the word (the string, the text)
it names; `Sought.command` is the search that answers it, in the directory the task names
("in the notes directory", "under src", none: here) and among the files it names ("the .txt
files"). A command searched for it (`search_for`) when a search tool ran on the word and
worked (found it or found nothing). Until one did, an answer is not taken, and once one did,
an answer asked from the outputs is asked beside what it printed
(`logos.agent.checks.searched_word`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from logos.protocol.task_directory import named_directory
from logos.result import Result

__all__ = ["Sought", "search_for", "sought_word"]

_SOUGHT = re.compile(
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
_NOT_WORDS = frozenset(
    {"a", "an", "the", "it", "them", "that", "this", "these", "those", "most", "more", "least"}
)
"""What follows "contains" in a task that asks for something else ("which file contains the
most lines")."""
_DEFINES = re.compile(r"defines?|function|class|method", re.IGNORECASE)
_SEARCH_TOOL = re.compile(r"(?<![\w-])(?:grep|egrep|fgrep|rg|ag|ack|awk)(?![\w-])")


@dataclass(frozen=True)
class Sought:
    """A word a task asks to find the file of, where it asks to look, and how."""

    word: str
    directory: str
    """"." when the task names none."""
    extension: str | None
    """Only the files with this ending (".txt"), when the task names one."""
    definition: bool
    """The task asks where the word is defined: the lines are shown, not only file names,
    so that a definition is told apart from a use."""

    @property
    def command(self) -> str:
        """The search that answers the task: the names of the files that hold the word, or,
        for a definition, each line that holds it after its file's name."""
        word = shlex.quote(self.word)
        shows = "n" if self.definition else "l"
        if self.extension is None:
            # WHY: a search of the whole checkout would list git's own files beside the work.
            skip = " --exclude-dir=.git" if self.directory == "." else ""
            return f"grep -r{shows}{skip} {word} {self.directory}"
        prefix = "" if self.directory == "." else f"{self.directory}/"
        return f"grep -{shows} {word} {prefix}*{self.extension}"


def sought_word(task: str) -> Sought | None:
    """The word `task` asks to find the file of (module docstring), or None."""
    match = _SOUGHT.search(task)
    if match is None:
        return None
    word = match.group("word").strip("\"'`")
    if word.lower() in _NOT_WORDS or not word.strip():
        return None
    definition = _DEFINES.fullmatch(match.group("kind") or match.group("verb") or "") is not None
    return Sought(
        word=word,
        directory=named_directory(match.group("between") + " " + task[match.end() :]),
        extension=match.group("ext"),
        definition=definition,
    )


def search_for(word: str, results: Sequence[Result]) -> Result | None:
    """The latest search tool that ran on `word` and worked: found it (exit 0) or nothing
    (exit 1 with no error); None when none did."""
    needle = word.lower()
    return next(
        (
            result
            for result in reversed(results)
            if needle in result.command.lower()
            and _SEARCH_TOOL.search(result.command) is not None
            and (result.ok or (result.exit_code == 1 and not result.stderr.strip()))
        ),
        None,
    )
