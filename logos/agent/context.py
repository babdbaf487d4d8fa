"""Keep a long run inside the model's context window by eliding old command output.

Only what is *sent* is shortened; the steps a run returns keep every byte. The oldest
messages that have a shorter form (`Message.elided`: a result envelope with its
stdout/stderr bodies replaced by their size, see `logos.protocol.envelope`) are sent in that form
until the conversation fits. Messages rebuilt from steps (`steps_to_messages`) have it, so
the history of a resumed run is elided too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from logos.providers.base import Message

CHARS_PER_TOKEN = 3.5
"""A conservative average for code and logs; real tokenizers give 3.5 to 4.5."""

HEADROOM = 0.8
"""Elide once the estimate passes this share of the window, leaving room for the reply."""


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
        if message.elided is None:
            continue
        fitted[index] = replace(message, content=message.elided, elided=None)
        if estimate_tokens(system, fitted) <= budget:
            break
    return fitted
