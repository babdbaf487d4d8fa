"""The loop lets its runner prepare while the first model request runs; runners that have
nothing to prepare (bash on this machine) do nothing."""

from __future__ import annotations

import anyio
import pytest

from logos import ExecOptions, LocalRunner, Result, Runner, run
from logos.approvals.approval import ApprovalRunner, NeverRunApprover
from tests.support.scripted import Reply, ScriptedProvider, config_for

pytestmark = pytest.mark.anyio
MODEL_DELAY_S = 0.5
PREPARE_S = 0.3


class PreparingRunner(Runner):
    """Takes PREPARE_S to prepare, and records when it prepared and ran what."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.prepared_with: list[ExecOptions] = []
        self.prepare_began: float | None = None
        self.prepared_at: float | None = None
        self.ran_at: list[float] = []

    async def prepare(self, options: ExecOptions) -> None:
        self.prepared_with.append(options)
        self.prepare_began = anyio.current_time()
        await anyio.sleep(PREPARE_S)
        if self.fail:
            raise RuntimeError("a runner whose preparation has a bug")
        self.prepared_at = anyio.current_time()

    async def run(self, command: str, options: ExecOptions) -> Result:
        self.ran_at.append(anyio.current_time())
        return Result(command=command, exit_code=0, stdout="ok\n")

    async def aclose(self) -> None:
        return None


def slow_first_reply() -> ScriptedProvider:
    """A model whose first reply's only delta (a block) comes after MODEL_DELAY_S."""
    return ScriptedProvider(
        [Reply("<cmd>make</cmd>", chunk=100, delay_s=MODEL_DELAY_S), Reply("Built.")]
    )


async def test_the_runner_prepares_while_the_first_model_request_runs() -> None:
    runner = PreparingRunner()
    options = ExecOptions(timeout_s=7)
    began = anyio.current_time()
    result = await run(
        config_for(slow_first_reply(), runner=runner, exec_options=options), [], "go"
    )
    assert result.stop_reason == "final", result.error
    assert runner.prepared_with == [options]  # once, with the options its commands get
    assert runner.prepare_began is not None and runner.prepared_at is not None
    # It began with the run, not after the model's reply, and was done before the block.
    assert runner.prepare_began - began < MODEL_DELAY_S / 2
    (ran_at,) = runner.ran_at
    assert runner.prepared_at <= ran_at
    assert ran_at - began >= MODEL_DELAY_S


async def test_a_preparation_still_running_when_the_run_ends_is_cancelled() -> None:
    runner = PreparingRunner()
    provider = ScriptedProvider([Reply("Nothing to run.")])
    with anyio.fail_after(PREPARE_S * 10):
        result = await run(config_for(provider, runner=runner), [], "hi")
    assert result.stop_reason == "final"
    assert runner.prepare_began is not None and runner.prepared_at is None


async def test_a_preparation_that_raises_does_not_end_the_run() -> None:
    runner = PreparingRunner(fail=True)
    result = await run(config_for(slow_first_reply(), runner=runner), [], "go")
    assert result.stop_reason == "final" and result.error is None
    assert [r.stdout for r in result.steps[1].results] == ["ok\n"]


async def test_the_local_runner_has_nothing_to_prepare() -> None:
    async with LocalRunner() as runner:
        with anyio.fail_after(1):
            assert await runner.prepare(ExecOptions(timeout_s=5)) is None
        assert (await runner.run("echo ready", ExecOptions())).stdout == "ready\n"


async def test_an_approval_runner_prepares_its_inner_runner_without_asking() -> None:
    inner = PreparingRunner()
    gated = ApprovalRunner(inner, NeverRunApprover())
    await gated.prepare(ExecOptions(timeout_s=9))
    assert inner.prepared_with == [ExecOptions(timeout_s=9)] and inner.prepared_at is not None
    assert inner.ran_at == []
