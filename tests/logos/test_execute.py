"""Concurrent execution of a message's blocks on real bash: order, concurrency, policy."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from logos import (
    ExecOptions,
    LocalRunner,
    Result,
    Runner,
    allow_all,
    execute_blocks,
    execute_blocks_sync,
)
from logos.agent.execute import BlockExecutor

pytestmark = pytest.mark.anyio


@pytest.mark.timeout(30)
async def test_eight_sleeps_run_concurrently_and_results_keep_order() -> None:
    commands = [f"sleep 1; echo {i}" for i in range(8)]
    started = time.monotonic()
    results = await execute_blocks(commands, LocalRunner(), ExecOptions())
    elapsed = time.monotonic() - started
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    assert [r.command for r in results] == commands
    # Sequential would take 8 s; concurrent takes about 1 s (generous bound for a busy CI box).
    assert elapsed < 4, f"8 concurrent sleeps took {elapsed:.1f} s"


@pytest.mark.timeout(30)
async def test_order_is_input_order_not_completion_order() -> None:
    results = await execute_blocks(
        ["sleep 0.6; echo slow", "echo fast"], LocalRunner(), ExecOptions()
    )
    assert [r.stdout for r in results] == ["slow\n", "fast\n"]


@pytest.mark.timeout(30)
async def test_max_concurrency_bounds_parallelism() -> None:
    started = time.monotonic()
    await execute_blocks(["sleep 0.5"] * 4, LocalRunner(), ExecOptions(), max_concurrency=2)
    assert time.monotonic() - started >= 0.95


async def test_policy_refusal_is_not_run_and_reaches_the_model(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("a\n")
    results = await execute_blocks(
        [f"sed -i 's/a/b/' {target}", f"cat {target}"], LocalRunner(), ExecOptions()
    )
    refused, shown = results
    assert refused.error is not None and "sed -i" in refused.error
    assert refused.exit_code is None
    assert target.read_text() == "a\n"
    assert shown.stdout == "a\n"


async def test_allow_all_policy_runs_everything(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("a\n")
    (result,) = await execute_blocks(
        [f"sed -i 's/a/b/' {target}"], LocalRunner(), ExecOptions(), policy=allow_all
    )
    assert result.exit_code == 0 and target.read_text() == "b\n"


async def test_a_policy_that_raises_refuses_and_the_others_still_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    def fussy_policy(command: str) -> str | None:
        if "touch" in command:
            raise ValueError("cannot parse this")
        return None

    results = await execute_blocks(
        [f"touch {marker}", "echo fine"], LocalRunner(), ExecOptions(), policy=fussy_policy
    )
    refused, fine = results
    assert refused.error is not None
    assert "policy failed" in refused.error and "cannot parse this" in refused.error
    assert not marker.exists()
    assert fine.stdout == "fine\n"


async def test_a_runner_that_raises_becomes_a_result() -> None:
    class BrokenRunner(Runner):
        async def run(self, command: str, options: ExecOptions) -> Result:
            raise RuntimeError("disk on fire")

        async def aclose(self) -> None:
            pass

    (result,) = await execute_blocks(["ls"], BrokenRunner(), ExecOptions())
    assert result.error is not None and "disk on fire" in result.error


async def test_executor_reports_start_and_result_callbacks() -> None:
    events: list[tuple[str, int]] = []

    async def on_result(index: int, result: Result) -> None:
        events.append(("result", index))

    executor = BlockExecutor(
        LocalRunner(),
        ExecOptions(),
        on_start=lambda index, command: events.append(("start", index)),
        on_result=on_result,
    )
    async with executor:
        executor.submit("echo a")
        executor.submit("echo b")
    assert sorted(events) == [("result", 0), ("result", 1), ("start", 0), ("start", 1)]
    assert [r.stdout for r in executor.results] == ["a\n", "b\n"]


@pytest.mark.timeout(30)
def test_sync_wrapper() -> None:
    results = execute_blocks_sync(["echo one", "exit 4"], LocalRunner())
    assert results[0].stdout == "one\n" and results[1].exit_code == 4
