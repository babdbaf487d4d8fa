"""Price and context-window lookups by model family."""

from __future__ import annotations

import pytest

from logos.providers import Usage
from logos.providers.pricing import PRICES, Price, context_window_for, estimate_cost, price_for


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-haiku-4-5", "claude-haiku-4"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("anthropic/claude-3.5-haiku", "claude-3-5-haiku"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
        ("gpt-4.1", "gpt-4.1"),
        ("o3-2025-04-16", "o3"),
        ("o3-mini", "o3-mini"),
        ("o4-mini", "o4-mini"),
        ("gpt-5", "gpt-5"),
        ("gpt-5.1", "gpt-5"),
        ("GPT-5-Mini-2025-08-07", "gpt-5-mini"),
    ],
)
def test_dated_and_routed_ids_find_their_family(model: str, family: str) -> None:
    assert price_for(model) is PRICES[family]


@pytest.mark.parametrize("model", ["gpt-4o1", "o30", "claude", "llama-3-8b", "", "gpt-4"])
def test_unknown_models_have_no_price(model: str) -> None:
    assert price_for(model) is None
    assert estimate_cost(model, Usage(input_tokens=10)) is None


def test_cost_counts_each_kind_of_token_at_its_price() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=2_000_000,
        cache_write_tokens=400_000,
    )
    # 3.00 + 1.50 + 0.60 + 1.50
    assert estimate_cost("claude-sonnet-4-5", usage) == pytest.approx(6.60)


def test_missing_cache_prices_fall_back_to_the_input_price() -> None:
    usage = Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000, cache_write_tokens=10)
    assert estimate_cost("x", usage, {"x": Price(2.0, 8.0)}) == pytest.approx(4.00002)


def test_callers_prices_replace_and_extend_the_table() -> None:
    mine = {"GPT-4o": Price(1.0, 1.0), "my-local-model": Price(0.0, 0.0)}
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert estimate_cost("gpt-4o-2024-08-06", usage, mine) == pytest.approx(2.0)
    assert estimate_cost("my-local-model-q4", usage, mine) == 0.0
    # The table's more specific family still wins over the caller's shorter prefix.
    assert estimate_cost("gpt-4o-mini", usage, mine) == pytest.approx(0.75)


def test_a_reported_cost_wins() -> None:
    assert estimate_cost("unknown", Usage(input_tokens=5, cost_usd=0.25)) == 0.25


def test_context_windows() -> None:
    assert context_window_for("claude-sonnet-4-5-20250929") == 200_000
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("gpt-4.1-nano") == 1_047_576
    assert context_window_for("gpt-5-mini") == 400_000
    assert context_window_for("smollm2") is None


def test_usage_adds_up() -> None:
    a = Usage(1, 2, 3, 4, 5)
    b = Usage(10, 20, 30, 40, 50, cost_usd=0.5)
    assert a + b == Usage(11, 22, 33, 44, 55, cost_usd=0.5)
    assert (a + a).cost_usd is None
    assert (b + b).cost_usd == 1.0
    assert b.total_input_tokens == 80
