"""What an agent is sent: what happened in the chat since its own last turn, bounded.

The person's messages, the other agents' replies and changes of the team, each labelled by
its author; the agent's own replies stay in its own session and are not sent again. Other
agents' command output reaches it only as a line per command. Past `max_tokens`, the
oldest messages are left out and counted exactly ("N earlier messages omitted"): the newest
always go.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from logos.agent.context import CHARS_PER_TOKEN
from logos.serve.projects.wire import ChatEntry

MAX_ENTRY_CHARS = 6_000
"""One message's share at most: a long one is cut in its middle, with a note."""


def _entry_text(entry: ChatEntry) -> str:
    text = entry.text.strip()
    if len(text) > MAX_ENTRY_CHARS:
        half = MAX_ENTRY_CHARS // 2
        cut = len(text) - 2 * half
        text = f"{text[:half]}\n[… {cut} characters cut …]\n{text[-half:]}"
    lines = [f"[{entry.author}] {text}"]
    if entry.commands:
        lines.append(f"  ({entry.author} ran: " + "; ".join(entry.commands) + ")")
    return "\n".join(lines)


def context_for(
    leave_out: Collection[str],
    chat: Sequence[ChatEntry],
    *,
    since: int,
    upto: int,
    max_tokens: int,
) -> tuple[str, int]:
    """The chat between sequence numbers `since` (exclusive) and `upto` (inclusive) but for
    the messages of the authors in `leave_out` (the agent itself; logos's news of the team
    when the agent's briefing holds it), and how many messages were omitted."""
    budget_chars = int(max_tokens * CHARS_PER_TOKEN)
    picked: list[str] = []
    used = 0
    newer = [
        e
        for e in chat[_first_index_after(chat, since) :]
        if e.seq <= upto and e.author not in leave_out
    ]
    omitted = 0
    for position in range(len(newer) - 1, -1, -1):
        text = _entry_text(newer[position])
        if picked and used + len(text) > budget_chars:
            omitted = position + 1
            break
        picked.append(text)
        used += len(text) + 1
    picked.reverse()
    if omitted:
        noun = "message" if omitted == 1 else "messages"
        picked.insert(0, f"[logos] {omitted} earlier {noun} omitted")
    return "\n".join(picked), omitted


def _first_index_after(chat: Sequence[ChatEntry], seq: int) -> int:
    """Where the messages after `seq` start (the chat is in sequence order)."""
    low, high = 0, len(chat)
    while low < high:
        middle = (low + high) // 2
        if chat[middle].seq <= seq:
            low = middle + 1
        else:
            high = middle
    return low
