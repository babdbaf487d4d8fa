"""When and how long to wait before sending a failed request again.

Only failures before the first streamed event are retried here: after it, the caller has
already shown part of the answer, so the failure becomes a `StreamInterruptedError` and the
caller decides.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import anyio

from logos.callback import invoke_callback
from logos.errors import ProviderError, RetriesExhaustedError, StreamInterruptedError
from logos.providers.base import OnRetry

T = TypeVar("T")

# WHY a cap on the exponent: 2**attempt overflows a float long before any sane policy ends.
_MAX_EXPONENT = 32


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, honouring the server's own `Retry-After`.

    `max_attempts` counts the first try: 5 means one try and up to four retries.
    """

    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not (self.base_delay_s >= 0 and self.max_delay_s >= 0):
            raise ValueError("base_delay_s and max_delay_s must be >= 0 seconds")

    def delay_s(self, attempt: int, retry_after_s: float | None = None) -> float:
        """How long to wait after failed attempt number `attempt` (1 for the first).

        A delay the server asked for wins over backoff, capped by `max_delay_s` so that a
        confused server cannot park the agent for an hour.
        """
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        ceiling = self.base_delay_s * 2.0 ** min(attempt - 1, _MAX_EXPONENT)
        # WHY full jitter: many clients hit by the same outage must not retry in lockstep.
        return random.uniform(0.0, min(ceiling, self.max_delay_s))


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait, from `retry-after-ms` or `Retry-After`.

    `Retry-After` may be a number of seconds or an HTTP date. Unparsable values count as
    absent rather than failing the request.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        seconds = _finite_float(millis)
        if seconds is not None:
            return max(seconds / 1000.0, 0.0)
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _finite_float(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _finite_float(text: str) -> float | None:
    try:
        number = float(text.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


async def retrying(
    attempt: Callable[[], AsyncGenerator[T, None]],
    policy: RetryPolicy,
    on_retry: OnRetry | None = None,
) -> AsyncGenerator[T, None]:
    """Runs `attempt()` (one request, streamed) until it succeeds or may not be retried.

    A retryable `ProviderError` before the first item is retried after a backoff; after the
    first item it becomes `StreamInterruptedError`. When attempts run out the last error is
    wrapped in `RetriesExhaustedError`.
    """
    number = 1
    while True:
        started = False
        try:
            async with aclosing(attempt()) as items:
                async for item in items:
                    started = True
                    yield item
            return
        except ProviderError as exc:
            if started:
                if exc.retryable:
                    raise _interrupted(exc) from exc
                raise
            if not exc.retryable:
                raise
            if number >= policy.max_attempts:
                raise RetriesExhaustedError(
                    f"gave up after {number} attempt{'s' if number > 1 else ''}; last error: "
                    f"{exc.message}. Check that the server is up and try again later.",
                    attempts=number,
                    last_error=exc,
                ) from exc
            delay = policy.delay_s(number, exc.retry_after_s)
            await invoke_callback(
                on_retry,
                f"{exc.message}; retrying in {delay:.1f} s "
                f"(attempt {number + 1} of {policy.max_attempts})",
                number,
            )
            await anyio.sleep(delay)
            number += 1


def _interrupted(cause: ProviderError) -> StreamInterruptedError:
    return StreamInterruptedError(
        f"the answer stopped part-way: {cause.message}. What arrived so far was delivered; "
        "send the request again to get a complete answer.",
        status=cause.status,
        retryable=True,
        retry_after_s=cause.retry_after_s,
    )
