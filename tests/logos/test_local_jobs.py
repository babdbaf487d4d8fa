"""LocalRunner's jobs, with real bash: a command still running at its background threshold goes
on in its process group, its output flowing into its saved copy, until it ends, times out,
is killed or the runner closes."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import pytest

from logos import ExecOptions, LocalRunner, execute_blocks_sync
from logos.result import JobEnd
from logos.runners.job_runner import JobRunner
from tests.support.processes import processes_matching

pytestmark = pytest.mark.anyio


def _options(**fields: object) -> ExecOptions:
    return ExecOptions(**{"timeout_s": 30.0, "background_after_s": 0.5, **fields})  # type: ignore[arg-type]


async def _ended(runner: LocalRunner, within_s: float = 20.0) -> list[JobEnd]:
    with anyio.fail_after(within_s):
        while not (ends := await runner.ended_jobs()):
            await anyio.sleep(0.05)
    return ends


async def test_a_local_runner_keeps_jobs() -> None:
    assert isinstance(LocalRunner(), JobRunner)


async def test_a_slow_command_goes_on_as_a_job_and_its_end_comes_later() -> None:
    async with LocalRunner() as runner:
        started = time.monotonic()
        result = await runner.run(
            "echo before; echo warn >&2; sleep 1.5; echo after; exit 3", _options()
        )
        assert time.monotonic() - started < 1.4
        assert result.job is not None and result.job.id == "1"
        assert (result.stdout, result.stderr, result.exit_code) == ("before\n", "warn\n", None)
        assert result.job.stdout_file is not None and result.job.stderr_file is not None
        [running] = await runner.list_jobs()
        assert running.id == "1" and running.command.startswith("echo before")
        assert running.stdout_file == result.job.stdout_file

        [end] = await _ended(runner)
        # From the command's start, not the job's: the 1.5 s sleep, less the clock's jitter
        # (1.4996 s was seen on a loaded machine).
        assert end.id == "1" and end.result.exit_code == 3 and end.result.duration_s >= 1.45
        assert end.result.stdout == "after\n" and end.result.stderr == ""  # the rest only
        assert Path(result.job.stdout_file).read_text() == "before\nafter\n"
        assert await runner.ended_jobs() == [] and await runner.list_jobs() == []


async def test_a_quick_command_never_becomes_a_job() -> None:
    async with LocalRunner() as runner:
        result = await runner.run("echo quick", _options())
        assert result.job is None and result.stdout == "quick\n" and result.exit_code == 0
        assert result.stdout_file is None
        assert await runner.list_jobs() == []


async def test_waiting_for_a_job_says_still_running_then_gives_its_end() -> None:
    async with LocalRunner() as runner:
        result = await runner.run("sleep 1.5; echo done", _options())
        assert result.job is not None
        assert await runner.wait_job(result.job.id, 0.1) is None
        end = await runner.wait_job(result.job.id, 10)
        assert end is not None and end.result.stdout == "done\n" and end.result.ok
        with pytest.raises(LookupError, match="reported already"):
            await runner.wait_job(result.job.id, 1)
        with pytest.raises(LookupError, match="no job 9"):
            await runner.kill_job("9")


async def test_a_killed_job_takes_its_whole_group_with_it(marker: str) -> None:
    async with LocalRunner() as runner:
        result = await runner.run(f"sleep {marker} & sleep {marker}", _options())
        assert result.job is not None
        assert processes_matching(f"sleep {marker}")
        end = await runner.kill_job(result.job.id)
        assert end.result.signal == signal.SIGTERM and end.result.error is None
        assert processes_matching(f"sleep {marker}") == []


async def test_a_job_obeys_its_commands_timeout(marker: str) -> None:
    async with LocalRunner() as runner:
        result = await runner.run(f"echo up; sleep {marker}", _options(timeout_s=1.5))
        assert result.job is not None
        [end] = await _ended(runner)
        assert end.result.timed_out and 1.5 <= end.result.duration_s < 10
        assert processes_matching(f"sleep {marker}") == []


async def test_a_jobs_output_stays_bounded_and_its_copy_keeps_it_whole() -> None:
    flood = "seq 1 200000; sleep 1; seq 200001 400000"
    async with LocalRunner() as runner:
        result = await runner.run(flood, _options(max_output_bytes=1024, background_after_s=0.5))
        assert result.job is not None and result.job.stdout_file is not None
        assert len(result.stdout) < 2048
        [end] = await _ended(runner)
        assert len(end.result.stdout) < 2048 and end.result.stdout.endswith("400000\n")
        assert end.result.stdout_dropped_bytes > 1_000_000
        saved = Path(result.job.stdout_file).read_text().splitlines()
        assert saved == [str(n) for n in range(1, 400001)]


async def test_a_runner_refuses_jobs_over_its_cap_in_words(marker: str) -> None:
    async with LocalRunner(max_jobs=1) as runner:
        first = await runner.run(f"sleep {marker}", _options())
        assert first.job is not None
        second = await runner.run(f"echo so far; sleep {marker}2", _options())
        assert second.job is None and second.stdout == "so far\n"
        assert second.error is not None and "keeps 1 jobs, its most" in second.error
        assert "`jobs`" in second.error
        assert processes_matching(f"sleep {marker}2") == []  # the refused one was stopped
        assert [job.id for job in await runner.list_jobs()] == ["1"]


async def test_closing_the_runner_ends_its_jobs(marker: str) -> None:
    runner = LocalRunner()
    result = await runner.run(f"sleep {marker}", _options())
    assert result.job is not None
    await runner.aclose()
    assert processes_matching(f"sleep {marker}") == []
    assert await runner.list_jobs() == []


def test_a_job_outlives_the_event_loop_that_started_it(tmp_path: Path) -> None:
    with LocalRunner() as runner:
        [result] = execute_blocks_sync(
            ["echo 1; sleep 1; echo 2; sleep 1; echo 3"], runner, _options()
        )
        assert result.job is not None and result.stdout == "1\n"
        time.sleep(2.5)  # no event loop runs: the job's thread keeps reading it

        async def ended() -> list[JobEnd]:
            return await runner.ended_jobs()

        [end] = anyio.run(ended)
        assert end.result.stdout == "2\n3\n" and end.result.ok
        assert result.job.stdout_file is not None
        assert Path(result.job.stdout_file).read_text() == "1\n2\n3\n"
