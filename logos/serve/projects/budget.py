"""Budgets that nest: project → user turn → agent call, in tokens, dollars (where the price
is known) and wall time.

Before each agent call the engine reserves its allowance: the least of what the call may
spend, what is left of the turn, and what is left of the project. The loop checks that
allowance before each model call it makes. A handoff gets what is left of the turn, never
a fresh budget; what the call spent is charged to the turn and the project after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from logos.serve.projects.wire import BudgetRequest, Spend


@dataclass(frozen=True)
class Allowance:
    tokens: int | None
    cost_usd: float | None
    wall_s: float | None
    exhausted: str | None = None
    """Which level has nothing left (then nothing is called)."""


def _least(*limits: float | None) -> float | None:
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None


def allowance(budget: BudgetRequest, project: Spend, turn: Spend) -> Allowance:
    tokens = _least(
        None if budget.max_tokens is None else budget.max_tokens - project.tokens,
        None if budget.turn_max_tokens is None else budget.turn_max_tokens - turn.tokens,
        budget.call_max_tokens,
    )
    cost = _least(
        None if budget.max_cost_usd is None else budget.max_cost_usd - project.cost_usd,
        None if budget.turn_max_cost_usd is None else budget.turn_max_cost_usd - turn.cost_usd,
        budget.call_max_cost_usd,
    )
    wall = _least(
        None if budget.max_wall_s is None else budget.max_wall_s - project.wall_s,
        None if budget.turn_max_wall_s is None else budget.turn_max_wall_s - turn.wall_s,
        budget.call_max_wall_s,
    )
    exhausted = None
    if tokens is not None and tokens <= 0:
        exhausted = "tokens"
    elif cost is not None and cost <= 0:
        exhausted = "dollars"
    elif wall is not None and wall <= 0:
        exhausted = "wall time"
    return Allowance(
        tokens=None if tokens is None else int(tokens),
        cost_usd=cost,
        wall_s=wall,
        exhausted=exhausted,
    )


def level_spent(budget: BudgetRequest, project: Spend, turn: Spend) -> str:
    """Which budget ran out, said for the chat."""
    for level, spent, tokens, cost, wall in (
        ("project", project, budget.max_tokens, budget.max_cost_usd, budget.max_wall_s),
        ("turn", turn, budget.turn_max_tokens, budget.turn_max_cost_usd, budget.turn_max_wall_s),
    ):
        if tokens is not None and spent.tokens >= tokens:
            return f"the {level}'s budget of {tokens} tokens is spent ({spent.tokens})"
        if cost is not None and spent.cost_usd >= cost:
            return f"the {level}'s budget of ${cost:g} is spent (${spent.cost_usd:.4f})"
        if wall is not None and spent.wall_s >= wall:
            return f"the {level}'s budget of {wall:g} s is spent ({spent.wall_s:.1f} s)"
    return "the budget is spent"


def add(spend: Spend, tokens: int, cost_usd: float | None, wall_s: float) -> None:
    spend.tokens += tokens
    spend.wall_s += wall_s
    if cost_usd is None:
        spend.cost_known = False
    else:
        spend.cost_usd += cost_usd


def plus(spend: Spend, more: Spend) -> Spend:
    return Spend(
        tokens=spend.tokens + more.tokens,
        cost_usd=spend.cost_usd + more.cost_usd,
        cost_known=spend.cost_known and more.cost_known,
        wall_s=spend.wall_s + more.wall_s,
    )
