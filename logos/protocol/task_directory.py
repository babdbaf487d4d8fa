"""The directory a task's words name: "the notes directory", "in the directory notes", "under
src", "in docs/"; "." for "this directory" or when they name none.

WHY one reading: the command that picks out the file a task asks for
(`logos.protocol.asked_file`) and the count of a directory's files of one kind
(`logos.protocol.asked_number`) both run in the directory the task names, and a phrase such
as "in the end" names none.
"""

from __future__ import annotations

import re

__all__ = ["files_of_kind", "named_directory"]

_PLACE = re.compile(
    r"\b(?:(?P<under>under|inside|within)\s+|(?P<in>in)\s+)?(?:the\s+)?"
    r"(?:(?P<named_first>directory|folder)\s+)?"
    r"(?P<place>[\w./-]*\w/?)(?:\s+(?P<named>directory|folder|dir)\b)?",
    re.IGNORECASE,
)
_HERE = frozenset({"this", "here", "current", "."})


def named_directory(text: str) -> str:
    """The first directory `text` names (module docstring), "." when it names none or this
    one."""
    for match in _PLACE.finditer(text):
        place = match.group("place")
        named = match.group("named") or (match.group("named_first") and match.group("in"))
        if not (named or match.group("under") or match.group("in")):
            continue
        if place.lower() in _HERE:
            return "."
        if named or match.group("under") or "/" in place:
            return place.rstrip("/")
    return "."


def files_of_kind(directory: str, extension: str) -> str:
    """The shell pattern of the files with `extension` (".json") in `directory` (as
    `named_directory` gives it): `config/*.json`, or `*.json` here."""
    return f"*{extension}" if directory == "." else f"{directory}/*{extension}"
