"""Markdown code fences in a model's prose: where each one is and what it holds.

Two checks of a reply need them: a command written in a ```` ```bash ```` fence instead of a
block (`logos.protocol.fenced_command`), and a `<result>` the model made up, which is not one
when it is an example inside a fence (`logos.protocol.fabricated_result`).

A fence is a CommonMark fenced code block: ``` or ~~~ (three or more), up to three spaces of
indent, an optional info string whose first word is the label; it is closed by a like fence
at least as long, or by the end of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPENING = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*")


@dataclass(frozen=True)
class CodeFence:
    """One fenced code block, by line numbers of the text split on newlines."""

    label: str
    """The info string's first word, lowercased ("" when there is none)."""
    body: list[str]
    opening_line: int
    closing_line: int
    """The closing fence's line; the line count when the text ends inside the fence."""


def code_fences(lines: list[str]) -> list[CodeFence]:
    """Every fence in `lines` (a text split on newlines), in order."""
    fences = []
    index = 0
    while index < len(lines):
        opening = _OPENING.fullmatch(lines[index])
        index += 1
        if opening is None:
            continue
        fence, label = opening.group(1), opening.group(2).lower()
        closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t\r]*")
        start = index
        while index < len(lines) and not closing.fullmatch(lines[index]):
            index += 1
        fences.append(CodeFence(label, lines[start:index], start - 1, index))
        index += 1
    return fences
