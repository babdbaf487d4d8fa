"""What a turn costs and how much context a model has, for common models.

Model ids are matched by their longest known prefix, so a dated id
("claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06") finds its family. A vendor prefix
("anthropic/", "openai/", as OpenRouter writes them) is ignored. An unknown model has no
price and no window: estimates are None, never errors.

Prices are list prices in USD per million tokens, as published by the vendors; callers can
pass their own (negotiated prices, new models) without touching this table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, TypeVar

V = TypeVar("V")


class TokenUsage(Protocol):
    """The counts a cost is computed from (logos.providers.base.Usage has them). WHY not that
    class: the providers use this table, so importing theirs would make a cycle."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def cache_read_tokens(self) -> int: ...

    @property
    def cache_write_tokens(self) -> int: ...

    @property
    def cost_usd(self) -> float | None: ...


@dataclass(frozen=True)
class Price:
    """USD per million tokens. Cache prices default to the input price when not given."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # Anthropic: cache write is the 5-minute cache price.
        "claude-opus-4-5": Price(5.0, 25.0, cache_read=0.50, cache_write=6.25),
        "claude-opus-4": Price(15.0, 75.0, cache_read=1.50, cache_write=18.75),
        "claude-sonnet-4": Price(3.0, 15.0, cache_read=0.30, cache_write=3.75),
        "claude-haiku-4": Price(1.0, 5.0, cache_read=0.10, cache_write=1.25),
        "claude-3-7-sonnet": Price(3.0, 15.0, cache_read=0.30, cache_write=3.75),
        "claude-3-5-sonnet": Price(3.0, 15.0, cache_read=0.30, cache_write=3.75),
        "claude-3-5-haiku": Price(0.80, 4.0, cache_read=0.08, cache_write=1.0),
        # OpenAI: cached input is discounted; writing to the cache costs nothing extra.
        "gpt-4o": Price(2.50, 10.0, cache_read=1.25),
        "gpt-4o-mini": Price(0.15, 0.60, cache_read=0.075),
        "gpt-4.1": Price(2.0, 8.0, cache_read=0.50),
        "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
        "gpt-4.1-nano": Price(0.10, 0.40, cache_read=0.025),
        "o3": Price(2.0, 8.0, cache_read=0.50),
        "o3-mini": Price(1.10, 4.40, cache_read=0.55),
        "o3-pro": Price(20.0, 80.0),
        "o4-mini": Price(1.10, 4.40, cache_read=0.275),
        "gpt-5": Price(1.25, 10.0, cache_read=0.125),
        "gpt-5-mini": Price(0.25, 2.0, cache_read=0.025),
        "gpt-5-nano": Price(0.05, 0.40, cache_read=0.005),
        "gpt-5-pro": Price(15.0, 120.0),
    }
)

_CONTEXT_WINDOWS: Mapping[str, int] = MappingProxyType(
    {
        "claude-opus-4": 200_000,
        "claude-sonnet-4": 200_000,
        "claude-haiku-4": 200_000,
        "claude-3-7-sonnet": 200_000,
        "claude-3-5-sonnet": 200_000,
        "claude-3-5-haiku": 200_000,
        "gpt-4o": 128_000,
        "gpt-4.1": 1_047_576,
        "o3": 200_000,
        "o4-mini": 200_000,
        "gpt-5": 400_000,
    }
)


def price_for(model: str, extra_prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `model`. `extra_prices` join the table (an equal key replaces the
    table's entry) and the longest matching prefix of either wins."""
    return _lookup({**PRICES, **(extra_prices or {})}, model)


def estimate_cost(
    model: str, usage: TokenUsage, extra_prices: Mapping[str, Price] | None = None
) -> float | None:
    """The USD cost of `usage`: the provider's own figure when it reported one, else the
    table's estimate, else None for a model without a known price."""
    if usage.cost_usd is not None:
        return usage.cost_usd
    price = price_for(model, extra_prices)
    if price is None:
        return None
    cache_read = price.input if price.cache_read is None else price.cache_read
    cache_write = price.input if price.cache_write is None else price.cache_write
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * cache_read
        + usage.cache_write_tokens * cache_write
    ) / 1_000_000


def context_window_for(model: str) -> int | None:
    """The context window of `model` in tokens, or None when it is not in the table."""
    return _lookup(_CONTEXT_WINDOWS, model)


def _lookup(table: Mapping[str, V], model: str) -> V | None:
    name = _canonical(model)
    # WHY canonical keys: "Claude-Sonnet-4.5" given by a caller replaces "claude-sonnet-4-5".
    candidates = {_canonical(prefix): value for prefix, value in table.items()}
    matching = [prefix for prefix in candidates if _matches(name, prefix)]
    return candidates[max(matching, key=len)] if matching else None


def _canonical(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]
    # WHY: OpenRouter writes Claude versions with dots ("claude-3.5-sonnet", "claude-sonnet-4.5"),
    # Anthropic with dashes; GPT names keep their dots ("gpt-4.1").
    if name.startswith("claude"):
        name = name.replace(".", "-")
    return name


def _matches(name: str, prefix: str) -> bool:
    # WHY a boundary: "gpt-4o" must not price "gpt-4o1", nor "o3" price "o30".
    if not name.startswith(prefix):
        return False
    return len(name) == len(prefix) or not name[len(prefix)].isalnum()
