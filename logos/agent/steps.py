"""What a run returns: its steps, why it stopped, and what it spent.

The caller owns history: a finished run's steps turn back into messages with
`steps_to_messages`, to resume the conversation with a follow-up prompt.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from logos.protocol.envelope import elide_outputs
from logos.protocol.parse import parse_cmd_blocks
from logos.providers.base import Message, Usage
from logos.result import JobEnd, Result

StopReason: TypeAlias = Literal[
    "final",
    "max_steps",
    "max_tokens_budget",
    "max_wall_time",
    "max_cost",
    "hallucination_limit",
    "canceled",
    "error",
]


@dataclass(frozen=True)
class StepMessage:
    """One message the run added to the conversation.

    `assistant`: what the model wrote (its `<cmd>` blocks included), its reasoning and the
    turn's usage. `result`: what logos sent back — the `<result>` envelope with the
    `results` it renders, the `block_notes` it shows under some blocks and the `job_ends`
    that follow them, and maybe notices after the envelope; or a notice alone.
    """

    role: Literal["assistant", "result"]
    content: str
    reasoning: str | None = None
    reasoning_signature: str | None = None
    redacted_reasoning: tuple[str, ...] = ()
    results: tuple[Result, ...] = ()
    block_notes: Mapping[int, str] = field(default_factory=dict)
    """Notes logos wrote under blocks of the envelope, by position in `results` (e.g. that
    the command failed the same way several times in a row)."""
    job_ends: tuple[JobEnd, ...] = ()
    """Ends of jobs the envelope reports after its blocks."""
    usage: Usage | None = None
    timestamp: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunResult:
    """The outcome of `run()`. Steps and usage are kept on every path, errors included."""

    response: str
    """The final answer's prose (no command blocks); empty unless `stop_reason == "final"`."""
    steps: tuple[StepMessage, ...]
    stop_reason: StopReason
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    """Known when the provider reported it or the model is in the price table."""
    jobs: tuple[JobEnd, ...] = ()
    """How each job of the run ended, in the order the run learned it: those whose end the
    model saw, then those the run stopped as it ended (it never leaves one running)."""

    @property
    def ok(self) -> bool:
        return self.stop_reason == "final"


def steps_to_messages(steps: Iterable[StepMessage]) -> list[Message]:
    """Rebuild provider messages from steps, to continue the conversation.

    Reasoning stays attached to its assistant message with its signature, so a provider
    that needs it (Anthropic) sends the thinking block first, unchanged. An empty assistant
    turn is left out: APIs reject empty messages, and the notice that follows says it all.
    A result's message carries its envelope with the outputs elided, to send near the
    context window.
    """
    messages = []
    for step in steps:
        if step.role == "assistant":
            if not (step.content.strip() or step.reasoning or step.redacted_reasoning):
                continue
            messages.append(
                Message(
                    role="assistant",
                    content=step.content,
                    reasoning=step.reasoning,
                    reasoning_signature=step.reasoning_signature,
                    redacted_reasoning=step.redacted_reasoning,
                )
            )
        else:
            elided = elide_outputs(step.content, step.results, step.block_notes, step.job_ends)
            messages.append(Message(role="user", content=step.content, elided=elided))
    return messages


def has_run_commands(messages: Iterable[Message]) -> bool:
    """Whether the conversation has run commands: an assistant message holds a block."""
    return any(parse_cmd_blocks(m.content) for m in messages if m.role == "assistant")


HistoryItem: TypeAlias = Message | Mapping[str, Any]
"""A history entry: a `Message`, or a plain `{"role": ..., "content": ...}` mapping."""


def normalize_history(history: Sequence[HistoryItem]) -> list[Message]:
    """Accept `Message`s and plain role/content mappings; say exactly what is wrong."""
    messages = []
    for position, item in enumerate(history):
        if isinstance(item, Message):
            messages.append(item)
            continue
        role, content = item.get("role"), item.get("content")
        if role not in ("user", "assistant"):
            raise ValueError(
                f"history[{position}] has role {role!r}: use 'user' or 'assistant' "
                "(the system prompt goes in Config.system_prompt)"
            )
        if not isinstance(content, str):
            raise ValueError(f"history[{position}] needs a string 'content'")
        messages.append(
            Message(
                role=role,
                content=content,
                reasoning=item.get("reasoning"),
                reasoning_signature=item.get("reasoning_signature"),
                redacted_reasoning=_redacted_of(item.get("redacted_reasoning"), position),
            )
        )
    return messages


def _redacted_of(value: object, position: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"history[{position}]['redacted_reasoning'] must be a list of strings")
    if not all(isinstance(data, str) for data in value):
        raise ValueError(f"history[{position}]['redacted_reasoning'] must be a list of strings")
    return tuple(value)
