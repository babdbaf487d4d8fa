"""The output memory budget: reservations fit, wait in arrival order, time out, come back."""

from __future__ import annotations

import anyio
import pytest

from sandboxd.api import MAX_OUTPUT_BYTES_LIMIT
from sandboxd.server.admission import (
    JSON_EXPANSION,
    OutputMemoryBudget,
    OutputMemoryRefused,
    Reservation,
    reply_memory_bound,
)

pytestmark = pytest.mark.anyio


async def _held_in_full(wait_s: float) -> tuple[OutputMemoryBudget, Reservation]:
    """A budget of 100 bytes whose requests wait up to `wait_s`, and a hold on all of it."""
    budget = OutputMemoryBudget(100, wait_s=wait_s)
    return budget, await budget.reserve(100)


async def _all_given_back(budget: OutputMemoryBudget) -> None:
    """Nothing is held any more: all of the budget can be reserved again at once."""
    assert budget.in_use == 0
    (await budget.reserve(budget.capacity)).release()


def test_the_bound_covers_both_streams_escaped_three_times_over() -> None:
    kept = 2 * MAX_OUTPUT_BYTES_LIMIT
    bound = reply_memory_bound(MAX_OUTPUT_BYTES_LIMIT)
    assert 3 * JSON_EXPANSION * kept < bound < 3 * JSON_EXPANSION * kept * 1.01
    assert reply_memory_bound(64) < reply_memory_bound(65)


async def test_reservations_that_fit_are_granted_at_once_and_given_back() -> None:
    budget = OutputMemoryBudget(100, wait_s=5)
    first = await budget.reserve(60)
    second = await budget.reserve(40)
    assert budget.in_use == 100
    first.release()
    first.release()  # idempotent
    second.release()
    assert budget.in_use == 0


async def test_more_than_the_whole_budget_is_refused_at_once() -> None:
    budget = OutputMemoryBudget(100, wait_s=30)
    with anyio.fail_after(1), pytest.raises(OutputMemoryRefused) as refused:
        await budget.reserve(101)
    assert refused.value.budget_exceeded
    assert "max_output_memory" in refused.value.message


async def test_a_waiting_request_gets_its_share_in_arrival_order() -> None:
    budget = OutputMemoryBudget(100, wait_s=10)
    holder = await budget.reserve(90)
    granted: list[str] = []

    async def wants(name: str, amount: int) -> None:
        reservation = await budget.reserve(amount)
        granted.append(name)
        await anyio.sleep(0.05)
        reservation.release()

    async with anyio.create_task_group() as group:
        group.start_soon(wants, "big", 60)
        await anyio.sleep(0.05)
        # Would fit now, but must not overtake the one that came first.
        group.start_soon(wants, "small", 10)
        await anyio.sleep(0.05)
        assert granted == []
        holder.release()
    assert granted == ["big", "small"]
    assert budget.in_use == 0


async def test_a_request_that_waits_too_long_is_refused_and_leaves_no_trace() -> None:
    budget, holder = await _held_in_full(wait_s=0.2)
    with anyio.fail_after(5), pytest.raises(OutputMemoryRefused) as refused:
        await budget.reserve(50)
    assert not refused.value.budget_exceeded
    assert "stayed in use" in refused.value.message
    holder.release()
    await _all_given_back(budget)


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    budget, holder = await _held_in_full(wait_s=10)
    with anyio.move_on_after(0.1):
        await budget.reserve(30)
    holder.release()
    await _all_given_back(budget)


async def test_a_grant_that_comes_as_its_waiter_is_cancelled_goes_back() -> None:
    budget, holder = await _held_in_full(wait_s=10)
    scope = anyio.CancelScope()

    async def waiter() -> None:
        with scope:
            await budget.reserve(30)
            raise AssertionError("the waiter was cancelled before it could resume")

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.05)  # queued
        scope.cancel()
        holder.release()  # grants the queued waiter before it sees its cancellation
    assert budget.in_use == 0
