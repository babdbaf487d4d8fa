"""RetryPolicy arithmetic and Retry-After parsing (the HTTP side is in the provider tests)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from logos.providers.retry import RetryPolicy, parse_retry_after

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_backoff_is_full_jitter_under_an_exponential_ceiling() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=60.0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (500, 60.0)]:
        delays = [policy.delay_s(attempt) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        # Jitter spreads the delays instead of repeating one value.
        assert max(delays) - min(delays) > ceiling / 4


def test_server_delay_wins_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=10.0, max_delay_s=30.0)
    assert policy.delay_s(1, retry_after_s=2.5) == 2.5
    assert policy.delay_s(1, retry_after_s=3600) == 30.0
    assert policy.delay_s(1, retry_after_s=-4) == 0.0


@pytest.mark.parametrize(
    "kwargs", [{"max_attempts": 0}, {"base_delay_s": -1.0}, {"max_delay_s": -1.0}]
)
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "whenever"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_parse_retry_after_http_date() -> None:
    later = format_datetime(NOW + timedelta(seconds=42), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=NOW) == 42.0
    earlier = format_datetime(NOW - timedelta(seconds=42), usegmt=True)
    assert parse_retry_after({"retry-after": earlier}, now=NOW) == 0.0
