"""The running jobs check: an answer given while a job still runs is answered once with the
list of jobs; the answer given again stands. A real job on local bash."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.reply import Reply
from logos.agent.checks.running_jobs import RunningJobs
from logos.commands.run_jobs import RunJobs
from logos.options import ExecOptions
from logos.runners.local import LocalRunner
from tests.support.checks import run_state

pytestmark = pytest.mark.anyio


async def test_an_answer_while_a_job_runs_is_answered_once_with_the_job() -> None:
    async with LocalRunner() as runner:
        started = await runner.run("sleep 30", ExecOptions(background_after_s=0.1))
        assert started.job is not None
        check, run = RunningJobs(), run_state(jobs=RunJobs(runner), ran_commands=True)
        with pytest.raises(AskAgain) as asked:
            await check.check(Reply(answer="Done."), run)
        assert asked.value.notice is not None and "job 1" in asked.value.notice
        assert "sleep 30" in asked.value.notice
        assert await check.check(Reply(answer="Done."), run) is None


async def test_without_jobs_or_on_the_last_turn_the_answer_passes() -> None:
    assert await RunningJobs().check(Reply(answer="Done."), run_state()) is None
    async with LocalRunner() as runner:
        await runner.run("sleep 30", ExecOptions(background_after_s=0.1))
        run = run_state(jobs=RunJobs(runner), last_turn=True)
        assert await RunningJobs().check(Reply(answer="Done."), run) is None
