"""A scripted model: a test double that plays fixed replies through the Provider protocol.

It is not shipped (the product talks to real models); it drives the loop
deterministically, with chosen chunking, pacing, usage, reasoning and failures.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from logos.agent.config import Config
from logos.errors import ProviderError, StreamInterruptedError
from logos.providers.base import (
    Finish,
    FinishReason,
    ModelRequest,
    OnRetry,
    Provider,
    ReasoningDelta,
    ReasoningSignature,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.runners.local import LocalRunner


@dataclass(frozen=True)
class Reply:
    text: str = ""
    finish: FinishReason = "stop"
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=100, output_tokens=20))
    reasoning: str | None = None
    signature: str | None = None
    chunk: int = 7
    """Characters per text delta."""
    delay_s: float = 0.0
    """Pause before each text delta: a model that streams slowly."""
    error: ProviderError | None = None
    """Raised before any event, as a provider does once its retries are spent."""
    interrupt_after: int | None = None
    """Characters to stream before the connection 'drops' (StreamInterruptedError)."""


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self,
        replies: list[Reply],
        *,
        model: str = "scripted-model",
        context_window: int | None = None,
    ) -> None:
        self.replies = list(replies)
        self.model = model
        self.context_window = context_window
        self.requests: list[ModelRequest] = []
        self.stream_finished_at: list[float] = []

    @classmethod
    def saying(cls, *texts: str) -> ScriptedProvider:
        """A provider whose replies are `texts`, in turn, streamed as `Reply` does."""
        return cls([Reply(text) for text in texts])

    async def stream(
        self, request: ModelRequest, on_retry: OnRetry | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError("the scripted model has no reply left for this request")
        reply = self.replies.pop(0)
        if reply.error is not None:
            raise reply.error
        if reply.reasoning:
            yield ReasoningDelta(reply.reasoning)
        if reply.signature:
            yield ReasoningSignature(reply.signature)
        limit = len(reply.text) if reply.interrupt_after is None else reply.interrupt_after
        for start in range(0, limit, reply.chunk):
            if reply.delay_s:
                await anyio.sleep(reply.delay_s)
            yield TextDelta(reply.text[start : min(start + reply.chunk, limit)])
        if reply.interrupt_after is not None:
            raise StreamInterruptedError("connection reset by peer mid-stream", retryable=True)
        self.stream_finished_at.append(anyio.current_time())
        yield UsageReport(reply.usage)
        yield Finish(reply.finish)

    async def aclose(self) -> None:
        return None


def config_for(provider: Provider, **overrides: object) -> Config:
    """A run's config for tests: a fixed system prompt, local bash, and `overrides`."""
    options: dict[str, object] = {"system_prompt": "test system prompt", "runner": LocalRunner()}
    options.update(overrides)
    return Config(provider=provider, **options)  # type: ignore[arg-type]


def numbers_file(directory: Path) -> Path:
    """numbers.txt in `directory`: 10, 20 and 30, one a line, which add up to 60."""
    numbers = directory / "numbers.txt"
    numbers.write_text("10\n20\n30\n")
    return numbers
