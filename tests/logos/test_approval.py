"""The approval wrapper, as the library offers it to any front end."""

from __future__ import annotations

import pytest

from logos import ExecOptions, LocalRunner, Result, Runner, execute_blocks
from logos.approvals.approval import (
    EDITED_NOTE,
    NEVER_RUN_ERROR,
    ApprovalAction,
    ApprovalDecision,
    ApprovalRunner,
    AutoApprover,
    NeverRunApprover,
)
from logos.commands.job_commands import JobCommands
from logos.commands.run_jobs import RunJobs
from logos.runners.job_runner import JobRunner

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


def test_the_wrapper_keeps_jobs_only_when_its_runner_does() -> None:
    with LocalRunner() as local:
        assert isinstance(ApprovalRunner(local, AutoApprover()), JobRunner)
    assert not isinstance(ApprovalRunner(_Recorder(), AutoApprover()), JobRunner)
    assert isinstance(ApprovalRunner(_Recorder(), AutoApprover()), ApprovalRunner)


class _Notes:
    """A family of loop commands that needs approval: `note TEXT` keeps TEXT."""

    usage = ("`note words` keeps the words for later.",)
    needs_approval = True

    def __init__(self) -> None:
        self.kept: list[str] = []

    def matches(self, command: str) -> bool:
        return command.startswith("note ")

    async def run(self, command: str, options: ExecOptions) -> Result:
        self.kept.append(command.removeprefix("note "))
        return Result(command=command, stdout="kept\n", exit_code=0)


class _Asked:
    """Answers every question with one action, and remembers what it was asked."""

    def __init__(self, action: ApprovalAction, edited: str | None = None) -> None:
        self.action = action
        self.edited = edited
        self.asked: list[str] = []

    async def decide(self, command: str) -> ApprovalDecision:
        self.asked.append(command)
        return ApprovalDecision(self.action, command, edited_command=self.edited)


async def test_loop_commands_that_need_approval_are_asked_about_first() -> None:
    notes, inner = _Notes(), _Recorder()
    declined = _Asked("no")
    [refused] = await execute_blocks(
        ["note secret"], ApprovalRunner(inner, declined), families=[notes]
    )
    assert refused.error is not None and refused.error.startswith("the user declined")
    assert (declined.asked, notes.kept, inner.commands) == (["note secret"], [], [])

    edited = _Asked("edit", "note public")
    [kept] = await execute_blocks(["note secret"], ApprovalRunner(inner, edited), families=[notes])
    assert (kept.command, kept.stdout, notes.kept) == ("note public", "kept\n", ["public"])
    assert kept.stderr.startswith(EDITED_NOTE)

    away = _Asked("edit", "rm -rf build")
    [not_run] = await execute_blocks(["note x"], ApprovalRunner(inner, away), families=[notes])
    assert not_run.error is not None and "not one logos answers itself" in not_run.error
    assert inner.commands == []  # an edit never turns a loop command into a shell command


async def test_job_commands_ask_nobody() -> None:
    asked = _Asked("no")
    async with ApprovalRunner(LocalRunner(), asked) as runner:
        assert isinstance(runner, JobRunner)
        [listing] = await execute_blocks(
            ["jobs"], runner, families=[JobCommands(RunJobs(runner), 30)]
        )
    assert listing.stdout == "no job is running.\n" and asked.asked == []
