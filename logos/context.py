"""Keep a long run inside the model's context window by eliding old command output.

Only what is *sent* is shortened; the steps a run returns keep every byte. The envelope
keeps its shape (every block, its command and status) so the model still knows what it
ran; only the stdout/stderr of the oldest results is replaced by a short notice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from logos.envelope import format_results
from logos.providers.base import Message
from logos.result import Result

CHARS_PER_TOKEN = 3.5
"""A conservative average for code and logs; real tokenizers give 3.5 to 4.5."""

HEADROOM = 0.8
"""Elide once the estimate passes this share of the window, leaving room for the reply."""


def estimate_tokens(system: str, messages: Sequence[Message]) -> int:
    chars = len(system) + sum(len(m.content) + len(m.reasoning or "") for m in messages)
    return int(chars / CHARS_PER_TOKEN) + 4 * len(messages)


def fit_to_window(
    system: str,
    messages: list[Message],
    results_by_message: dict[int, Sequence[Result]],
    context_window: int | None,
    max_output_tokens: int | None,
) -> list[Message]:
    """Return `messages`, with the oldest result envelopes elided until they fit.

    `results_by_message` maps a message's index to the results its envelope renders.
    """
    fitted = list(messages)
    if not context_window:
        return fitted
    budget = int(context_window * HEADROOM) - (max_output_tokens or 0)
    if estimate_tokens(system, fitted) <= budget:
        return fitted
    # Oldest first: the latest results are what the model is working from.
    for index in sorted(results_by_message):
        results = results_by_message[index]
        fitted[index] = replace(fitted[index], content=format_results(elide(results)))
        if estimate_tokens(system, fitted) <= budget:
            break
    return fitted


def elide(results: Sequence[Result]) -> list[Result]:
    """Results with their output replaced by a notice of how much there was."""
    return [
        replace(
            result,
            stdout=_notice(result.stdout) if result.stdout else "",
            stderr=_notice(result.stderr) if result.stderr else "",
            stdout_dropped_bytes=0,
            stderr_dropped_bytes=0,
        )
        for result in results
    ]


def _notice(text: str) -> str:
    size = len(text.encode("utf-8", errors="replace"))
    return f"[output elided to save context: {size} bytes; run the command again if needed]"
