"""A scripted model for the benchmarks: fixed replies, streamed at a chosen pace.

A benchmark double, never shipped: it measures what logos itself costs per step, without a
network or a real model's latency in the figure.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

import anyio

from logos.providers.base import (
    Finish,
    ModelRequest,
    OnRetry,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class StreamTiming:
    """When one reply's stream started and sent its last delta (time.perf_counter)."""

    started: float
    finished: float

    @property
    def duration_s(self) -> float:
        return self.finished - self.started


class ScriptedModel:
    """Plays `replies` in order, one per request, in deltas of `chunk_chars` characters.

    `tokens_per_s` paces the stream (one token = 4 characters) on a fixed schedule, so that
    sleeping late never stretches the whole reply; None streams without pausing.
    `first_delta_s`: the pause before each reply's first delta (a model's time to its first
    token).
    """

    name = "scripted"
    model = "bench-scripted"
    context_window: int | None = 1_000_000

    def __init__(
        self,
        replies: Sequence[str],
        *,
        chunk_chars: int = CHARS_PER_TOKEN,
        tokens_per_s: float | None = None,
        first_delta_s: float = 0.0,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError(f"chunk_chars must be at least 1, got {chunk_chars}")
        self._replies = list(replies)
        self._first_delta_s = first_delta_s
        self._chunk_chars = chunk_chars
        self._delta_interval_s = (
            None if tokens_per_s is None else chunk_chars / CHARS_PER_TOKEN / tokens_per_s
        )
        self.timings: list[StreamTiming] = []

    async def stream(
        self, request: ModelRequest, on_retry: OnRetry | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        if not self._replies:
            raise RuntimeError(
                "the scripted model ran out of replies: the benchmark asked for more steps "
                "than it scripted"
            )
        text = self._replies.pop(0)
        await anyio.sleep(self._first_delta_s)
        started = time.perf_counter()
        step = self._chunk_chars
        for number, start in enumerate(range(0, len(text), step)):
            if self._delta_interval_s is not None:
                due = started + number * self._delta_interval_s
                await anyio.sleep(max(0.0, due - time.perf_counter()))
            yield TextDelta(text[start : start + step])
        self.timings.append(StreamTiming(started, time.perf_counter()))
        tokens = max(1, len(text) // CHARS_PER_TOKEN)
        yield UsageReport(Usage(input_tokens=1000, output_tokens=tokens))
        yield Finish("stop")

    async def aclose(self) -> None:
        return None
