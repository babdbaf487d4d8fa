"""What every model provider speaks: the request, the streamed events and the protocol.

The loop depends on these types only, never on a wire format, so adding a provider never
touches the loop.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

FinishReason: TypeAlias = Literal["stop", "length", "content_filter", "other"]

OnRetry: TypeAlias = Callable[[str, int], Awaitable[None] | None]
"""Called as `on_retry(reason, attempt)` before each backoff sleep; may be async.

`reason` is for a human ("429 rate limited; retrying in 3.2 s"); `attempt` is the number
of the attempt that just failed (1 for the first).
"""


@dataclass(frozen=True)
class Message:
    """One conversation turn as the provider sends it.

    `reasoning` and its `reasoning_signature` come from Anthropic extended thinking and must
    be sent back unchanged in later requests; `redacted_reasoning` holds the opaque `data`
    of each `redacted_thinking` block, in order. Reasoning without a signature cannot be
    sent back to Anthropic (the API rejects unsigned thinking) and is dropped there; the
    OpenAI wire format has no way to send reasoning back and always drops it.
    """

    role: Literal["user", "assistant"]
    content: str
    reasoning: str | None = None
    reasoning_signature: str | None = None
    redacted_reasoning: tuple[str, ...] = ()
    elided: str | None = None
    """A shorter `content` (command outputs elided) that is sent instead once the
    conversation nears the model's context window; None when nothing can be left out."""


@dataclass(frozen=True)
class ModelRequest:
    """One request for a completion: the system prompt and the conversation so far."""

    system: str
    messages: Sequence[Message]
    max_tokens: int | None = None
    """Output token limit; None leaves it to the provider's default."""
    temperature: float | None = None
    stop: Sequence[str] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Merged into the JSON body last, so it can set or override any field."""


@dataclass(frozen=True)
class Usage:
    """Tokens one turn used, in the units the price tables use.

    `input_tokens` counts only the uncached input (billed at the full input price); the
    cache counters are separate, so the whole prompt is `total_input_tokens`.
    `output_tokens` includes `reasoning_tokens`, which is informative only.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    """The cost the provider itself reported (e.g. OpenRouter's `usage.cost`), if any."""

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None:
            cost = other.cost_usd
        elif other.cost_usd is None:
            cost = self.cost_usd
        else:
            cost = self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=cost,
        )


@dataclass(frozen=True)
class TextDelta:
    """The next piece of the answer's text."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """The next piece of the model's visible reasoning ("thinking")."""

    text: str


@dataclass(frozen=True)
class ReasoningSignature:
    """A piece of the signature of the reasoning (Anthropic); concatenate the pieces."""

    signature: str


@dataclass(frozen=True)
class RedactedReasoning:
    """One encrypted reasoning block (Anthropic `redacted_thinking`), to send back as is."""

    data: str


@dataclass(frozen=True)
class UsageReport:
    """The turn's total usage: sent exactly once, just before `Finish`.

    Zero counts when the server reported none.
    """

    usage: Usage


@dataclass(frozen=True)
class Finish:
    """The turn ended; always the last event of a successful stream."""

    reason: FinishReason
    raw: str | None = None
    """The provider's own word for it (e.g. "end_turn", "tool_calls")."""


StreamEvent: TypeAlias = (
    TextDelta | ReasoningDelta | ReasoningSignature | RedactedReasoning | UsageReport | Finish
)


class Provider(Protocol):
    """Streams one model turn.

    A successful stream yields deltas, then one `UsageReport`, then one `Finish`. Failures
    raise `logos.errors.ProviderError` subclasses. Retryable failures before the first
    event are retried under the provider's retry policy; a retryable failure after it
    raises `StreamInterruptedError` (not retried: the caller has already shown part of the
    answer); a failure no retry can fix raises as itself.

    Close the stream when leaving it early (`contextlib.aclosing`) or cancel it: either
    closes the HTTP response at once.
    """

    name: str
    model: str
    context_window: int | None
    """The model's context window in tokens, when known."""

    def stream(
        self, request: ModelRequest, on_retry: OnRetry | None = None
    ) -> AsyncGenerator[StreamEvent, None]: ...

    async def aclose(self) -> None: ...
