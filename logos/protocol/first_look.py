"""Where a first look at a repository finds its facts: the README, else the manifest the
listing shows (`logos.protocol.facts.MANIFESTS`).

Measured with the default 0.5B model on a repository with no README: its first look ran `ls`
and `head -n 40 README.md`, which failed, and it answered from the listing alone ("a web
application", "JavaScript with React") instead of reading `package.json`, which names the
framework. `next_look` finds what to read instead: after a look that failed for a file
that is not there, a file the task names that no command read yet (asked for the first line
of readme.txt, it looked in README.md, twice, then made the line up), else the README or
manifest a listing shows that no command read yet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from logos.protocol.facts import MANIFESTS
from logos.protocol.task_files import FILE_NAME, files_to_write
from logos.result import Result

_READMES = ("README.md", "README", "README.rst", "README.txt", "readme.md")
_LOOKED_AT = (*_READMES, *MANIFESTS)
"""What a first look reads, in the order it is best read."""
_LISTING = re.compile(r"(?:^|&&|;|\|)\s*(?:ls|find|tree)\b")
_DIRECTORY = re.compile(r"\b([\w.-]+/?)\s+(?:directory|folder)\b", re.IGNORECASE)
"""A directory as a task names it: "the logs directory"."""
_MISSING = re.compile(r"No such file or directory|cannot open|cannot access")


def next_look(results: Sequence[Result], task: str = "") -> tuple[str, str] | None:
    """After a look that failed for a file that is not there: (that file, the file to read
    instead): a file `task` names that no command read yet, else the README or manifest a
    listing shows; None when no look failed so, or there is nothing unread to read."""
    missed = _missed(results)
    if missed is None:
        return None
    look = _unread_named(task, results) or unread_look(results)
    return None if look is None or look == missed else (missed, look)


def unlisted_directory(results: Sequence[Result], task: str) -> tuple[str, str] | None:
    """After a look that failed for a file that is not there, with nothing to read instead:
    (that file, a directory the task names ("the inbox directory") that a listing shows and
    no command looked into yet).

    WHY: asked for the extension of the only file in the inbox directory, the default model
    looked for a README, twice, and answered ".md"."""
    missed = _missed(results)
    if missed is None:
        return None
    listed = {
        word.rstrip("/").removeprefix("./")
        for result in results
        if result.ok and _LISTING.search(result.command)
        for word in result.stdout.split()
    }
    for match in _DIRECTORY.finditer(task):
        name = match.group(1).rstrip("/")
        if name in listed and not _read(name, results):
            return missed, name
    return None


def unread_look(results: Sequence[Result]) -> str | None:
    """The README or manifest the listings among `results` show that no command read yet,
    the likeliest first."""
    listed = _listed(results)
    return next((name for name in _LOOKED_AT if name in listed and not _read(name, results)), None)


def _unread_named(task: str, results: Sequence[Result]) -> str | None:
    """A file the task names as one to read (not to write) that no command read yet."""
    named = [m.group(1) for m in re.finditer(FILE_NAME, task)]
    written = set(files_to_write(task))
    return next((n for n in named if n not in written and not _read(n, results)), None)


def _read(name: str, results: Sequence[Result]) -> bool:
    """Whether a command that succeeded named the file."""
    pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w])")
    return any(result.ok and pattern.search(result.command) for result in results)


def _missed(results: Sequence[Result]) -> str | None:
    """The file the latest look that missed looked for and did not find (as the command
    named it).

    WHY the latest: handed `head -n 40 readme.txt` after missing README.md, the default
    model ran `head -n 40 README.txt`; that miss is the one to answer."""
    for result in reversed(results):
        if result.ok or not _MISSING.search(result.stderr):
            continue
        for word in result.command.split():
            name = word.strip("'\"")
            if "." in name and name in result.stderr:
                return name
    return None


def _listed(results: Sequence[Result]) -> set[str]:
    """The READMEs and manifests that the listings among `results` show."""
    listed = set()
    for result in results:
        if not (result.ok and _LISTING.search(result.command)):
            continue
        for line in result.stdout.splitlines():
            for word in line.split():
                name = word.rstrip("/*").removeprefix("./")
                if name in _LOOKED_AT:
                    listed.add(name)
    return listed
