"""Directives in a message: who it is handed to, and whether its author listens for the
person's next message. Pure text in, text out.

A directive is `@name` at the start of a line, or a handoff block
`<handoff to="name">why</handoff>`. A name inside a `<cmd>` block, a code fence, inline
code, a quoted line (`> …`) or quotation marks is no directive: agents quote each other
and print names in commands all the time. A reply that ends with the listening marker
claims the person's next message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LISTENING_MARKER = "[listening]"
_CMD = re.compile(r"<cmd>.*?(?:</cmd>|\Z)", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")
_QUOTE_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
_MENTION = re.compile(r"^[ \t]*@([A-Za-z][A-Za-z0-9_-]{0,63})\b[ \t:,-]*(.*)$", re.MULTILINE)
_HANDOFF = re.compile(
    r"<handoff\s+to\s*=\s*[\"']?([A-Za-z][A-Za-z0-9_-]{0,63})[\"']?\s*>(.*?)</handoff>",
    re.DOTALL,
)


@dataclass(frozen=True)
class Directive:
    target: str
    """The name as written (lower-cased)."""
    note: str
    """The rest of its line, or the handoff block's text: why it is handed over."""


def _blanked(match: re.Match[str]) -> str:
    """The match as spaces, its line breaks kept: what follows stays where it was."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _plain_text(text: str, patterns: tuple[re.Pattern[str], ...] | None = None) -> str:
    """`text` without what can hold no directive (commands, code, quotes), each blanked
    in place: a position in it is the same position in `text`."""
    for pattern in patterns or (_CMD, _FENCE, _INLINE_CODE, _QUOTE_LINE):
        text = pattern.sub(_blanked, text)
    return text


def directives(text: str) -> list[Directive]:
    """The directives of a message, in the order written; each note as written, its
    inline code kept (only commands and code blocks are left out of it)."""
    plain = _plain_text(text)
    noted = _plain_text(text, (_CMD, _FENCE))

    def note(match: re.Match[str]) -> str:
        return " ".join(noted[match.start(2) : match.end(2)].split())

    found: list[tuple[int, Directive]] = []
    for match in _HANDOFF.finditer(plain):
        found.append((match.start(), Directive(match.group(1).lower(), note(match))))
    without_blocks = _HANDOFF.sub(_blanked, plain)
    for match in _MENTION.finditer(_QUOTED.sub(_blanked, without_blocks)):
        found.append((match.start(), Directive(match.group(1).lower(), note(match))))
    return [directive for _, directive in sorted(found, key=lambda pair: pair[0])]


def listens(text: str) -> bool:
    """Whether the reply ends with the listening marker (outside commands and code)."""
    return _plain_text(text).rstrip().endswith(LISTENING_MARKER)


def without_marker(text: str) -> str:
    """The reply as the chat shows it: the listening marker taken off its end."""
    stripped = text.rstrip()
    if stripped.endswith(LISTENING_MARKER):
        return stripped[: -len(LISTENING_MARKER)].rstrip()
    return text
