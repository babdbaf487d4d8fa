"""The approval wrapper, as the library offers it to any front end."""

from __future__ import annotations

import pytest

from logos import ExecOptions, LocalRunner, Result, Runner
from logos.approval import (
    NEVER_RUN_ERROR,
    ApprovalDecision,
    ApprovalRunner,
    AutoApprover,
    NeverRunApprover,
)

pytestmark = pytest.mark.anyio


class _Recorder(Runner):
    """Records what it was asked to run and whether it was closed."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.closed = 0

    async def run(self, command: str, options: ExecOptions) -> Result:
        self.commands.append(command)
        return Result(command=command, exit_code=0)

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_dry_run_runs_nothing_and_reports_each_decision() -> None:
    inner = _Recorder()
    decisions: list[ApprovalDecision] = []
    runner = ApprovalRunner(inner, NeverRunApprover(), decisions.append)
    result = await runner.run("make test", ExecOptions())
    assert result.error == NEVER_RUN_ERROR
    assert inner.commands == []
    assert [(d.action, d.command) for d in decisions] == [("never-run", "make test")]


async def test_leaving_async_with_closes_the_inner_runner() -> None:
    inner = _Recorder()
    async with ApprovalRunner(inner, AutoApprover()) as runner:
        assert (await runner.run("true", ExecOptions())).ok
    assert (inner.commands, inner.closed) == (["true"], 1)


def test_the_runners_meet_the_protocol() -> None:
    with LocalRunner() as local:
        assert isinstance(local, Runner)
        assert isinstance(ApprovalRunner(local, AutoApprover()), Runner)
