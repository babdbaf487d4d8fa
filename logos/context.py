"""Keep a long run inside the model's context window by eliding old command output.

Only what is *sent* is shortened; the steps a run returns keep every byte. An envelope
keeps its shape (every block, its command and status) so the model still knows what it
ran; only the stdout/stderr bodies of the oldest envelopes are replaced by a short notice.
Envelopes are recognised by their text, so the history of a resumed run is elided too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from logos.providers.base import Message

CHARS_PER_TOKEN = 3.5
"""A conservative average for code and logs; real tokenizers give 3.5 to 4.5."""

HEADROOM = 0.8
"""Elide once the estimate passes this share of the window, leaving room for the reply."""

# WHY the anchors and the lookahead: an output may itself hold a line "</stdout>" (a file
# about envelopes, an XML log). The real closing tag starts a line and is followed by what
# the envelope puts after a stream: its cut note, the stderr stream, or the block's end.
_STREAM_BODY = re.compile(
    r"^<(stdout|stderr)>\n(.*?)^</\1>"
    r"(?=\n(?:note: \1 was cut|<stderr>\n|</block>\n(?:<block index=\"\d+\">|</result>)))",
    re.DOTALL | re.MULTILINE,
)
_ENVELOPE_START = "<result>"


def estimate_tokens(system: str, messages: Sequence[Message]) -> int:
    chars = len(system) + sum(len(m.content) + len(m.reasoning or "") for m in messages)
    return int(chars / CHARS_PER_TOKEN) + 4 * len(messages)


def fit_to_window(
    system: str,
    messages: Sequence[Message],
    context_window: int | None,
    max_output_tokens: int | None,
) -> list[Message]:
    """Return a copy of `messages` with the oldest envelopes elided until they fit."""
    fitted = list(messages)
    if not context_window:
        return fitted
    budget = int(context_window * HEADROOM) - (max_output_tokens or 0)
    if estimate_tokens(system, fitted) <= budget:
        return fitted
    # Oldest first: the latest results are what the model is working from.
    for index, message in enumerate(fitted):
        if message.role != "user" or not message.content.startswith(_ENVELOPE_START):
            continue
        fitted[index] = replace(message, content=elide_envelope(message.content))
        if estimate_tokens(system, fitted) <= budget:
            break
    return fitted


def elide_envelope(envelope: str) -> str:
    """The envelope with every stdout/stderr body replaced by how much there was."""

    def notice(match: re.Match[str]) -> str:
        body = match.group(2)
        if body.startswith("[output elided"):
            return match.group(0)
        size = len(body.encode("utf-8", errors="replace"))
        return (
            f"<{match.group(1)}>\n[output elided to save context: {size} bytes; "
            f"run the command again if needed]\n</{match.group(1)}>"
        )

    return _STREAM_BODY.sub(notice, envelope)
