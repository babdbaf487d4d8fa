"""Jobs in the agent loop, driven by a scripted model, with real bash: a slow command goes on
as a job, the model keeps working, and each job's end reaches it in a later envelope."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from logos import Callbacks, Config, ExecOptions, LocalRunner, run
from logos.agent.steps import RunResult
from logos.approvals.approval import ApprovalRunner, AutoApprover
from logos.result import JobEnd
from tests.support.processes import processes_matching
from tests.support.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def _config(provider: ScriptedProvider, **options: float) -> Config:
    exec_options = ExecOptions(
        timeout_s=options.get("timeout_s", 30.0),
        background_after_s=options.get("background_after_s", 0.5),
        max_output_bytes=int(options.get("max_output_bytes", 32 * 1024)),
    )
    return Config(
        provider=provider,
        system_prompt="test system prompt",
        runner=ApprovalRunner(LocalRunner(), AutoApprover()),
        exec_options=exec_options,
    )


async def _run(provider: ScriptedProvider, **options: float) -> tuple[RunResult, list[tuple]]:
    ends: list[tuple[JobEnd, bool]] = []
    config = _config(provider, **options)
    try:
        result = await run(config, [], "go", Callbacks(on_job_end=lambda e, s: ends.append((e, s))))
    finally:
        await config.runner.aclose()
    return result, ends


def _envelope(provider: ScriptedProvider, request: int) -> str:
    return provider.requests[request].messages[-1].content


async def test_a_fast_result_comes_at_once_and_the_slow_ones_end_in_a_later_envelope() -> None:
    provider = ScriptedProvider(
        [
            Reply("Both.\n<cmd>echo fast</cmd>\n<cmd>sleep 4; echo slow done</cmd>"),
            # The model keeps working (a slow stream) while the job runs.
            Reply("Meanwhile.\n<cmd>echo other</cmd>" + " " * 70, chunk=10, delay_s=0.7),
            Reply("Fast printed fast; the slow one finished."),
        ]
    )
    result, ends = await _run(provider)
    assert result.stop_reason == "final"
    first = result.steps[1]
    assert first.role == "result"
    assert first.timestamp - result.steps[0].timestamp < 3.0  # not the 4 s of the slow one
    fast, slow = first.results
    assert fast.stdout == "fast\n" and fast.job is None
    assert slow.job is not None and slow.job.id == "1" and slow.exit_code is None
    envelope = _envelope(provider, 1)
    assert "$ echo fast" in envelope and "so it goes on as job 1" in envelope
    assert "<job " not in envelope

    later = _envelope(provider, 2)
    assert "$ echo other" in later and '<job id="1">' in later
    assert "job 1 ended after" in later and "slow done" in later
    [end] = result.steps[3].job_ends
    assert end.result.stdout == "slow done\n" and end.result.ok
    assert result.jobs == (end,) and ends == [(end, True)]


async def test_a_later_block_waits_for_a_job() -> None:
    provider = ScriptedProvider.saying(
        "<cmd>sleep 2; echo built</cmd>", "Waiting.\n<cmd>wait %1</cmd>", "Built."
    )
    result, _ = await _run(provider)
    assert result.stop_reason == "final"
    waited = _envelope(provider, 2)
    assert "$ wait %1" in waited and "job 1 has ended; its end follows the blocks." in waited
    assert waited.index("</block>") < waited.index('<job id="1">')
    assert "built" in waited.split('<job id="1">')[1]
    [wait] = result.steps[3].results
    assert wait.ok and 1.0 < wait.duration_s < 10


async def test_the_model_stops_a_job(marker: str) -> None:
    provider = ScriptedProvider.saying(
        f"<cmd>echo serving; sleep {marker}</cmd>", "Enough.\n<cmd>kill %1</cmd>", "Stopped it."
    )
    result, _ = await _run(provider)
    stopped = _envelope(provider, 2)
    assert "job 1 was stopped; its end follows the blocks." in stopped
    assert "killed by SIGTERM" in stopped
    assert processes_matching(f"sleep {marker}") == []
    [end] = result.jobs
    assert end.result.signal == signal.SIGTERM


async def test_a_job_still_running_at_the_answer_is_named_once_then_stopped(marker: str) -> None:
    provider = ScriptedProvider.saying(
        f"<cmd>sleep {marker}</cmd>", "All done.", "All done, really."
    )
    result, ends = await _run(provider)
    assert result.stop_reason == "final" and result.response == "All done, really."
    notice = _envelope(provider, 2)
    assert notice.startswith("Your reply has no block, but these jobs are still running: job 1")
    assert "they are stopped" in notice
    assert processes_matching(f"sleep {marker}") == []
    [end] = result.jobs
    assert end.id == "1" and end.result.signal == signal.SIGTERM
    assert ends == [(end, False)]  # the model never saw it: the run stopped it


async def test_a_job_past_its_timeout_is_killed_and_says_so(marker: str) -> None:
    provider = ScriptedProvider.saying(
        f"<cmd>echo up; sleep {marker}</cmd>", "<cmd>wait %1</cmd>", "Hm."
    )
    result, _ = await _run(provider, timeout_s=2.0)
    timed_out = _envelope(provider, 2)
    assert "job 1 timed out after 2" in timed_out
    [end] = result.jobs
    assert end.result.timed_out and processes_matching(f"sleep {marker}") == []


async def test_a_jobs_output_larger_than_the_cap_stays_bounded(tmp_path: Path) -> None:
    provider = ScriptedProvider.saying(
        "<cmd>seq 1 100000; sleep 1; seq 100001 300000</cmd>", "<cmd>wait %1</cmd>", "Counted."
    )
    result, _ = await _run(provider, max_output_bytes=1024)
    for request in (1, 2):
        assert len(_envelope(provider, request)) < 4096
    [end] = result.jobs
    assert end.result.stdout.endswith("300000\n") and end.result.stdout_file is not None
    saved = Path(end.result.stdout_file).read_text().split()
    assert saved == [str(n) for n in range(1, 300001)]
    assert "its whole output is in" in _envelope(provider, 2)


async def test_jobs_list_and_unknown_jobs_are_answered_in_words(marker: str) -> None:
    provider = ScriptedProvider.saying(
        f"<cmd>sleep {marker}</cmd>",
        "<cmd>jobs</cmd>\n<cmd>wait %7</cmd>\n<cmd>kill %1</cmd>",
        "Done.",
    )
    await _run(provider)
    answered = _envelope(provider, 2)
    assert f"[1] running for 0 s: sleep {marker}" in answered or "[1] running for 1 s" in answered
    assert "error: there is no job 7" in answered and "`jobs` lists the jobs" in answered


async def test_the_default_system_prompt_documents_the_job_commands() -> None:
    provider = ScriptedProvider([Reply("Nothing to do.")])
    config = Config(
        provider=provider,
        runner=LocalRunner(),
        exec_options=ExecOptions(background_after_s=30),
    )
    await run(config, [], "hi")
    system = provider.requests[0].system
    assert "still running after 30 s goes on as a job" in system and "`wait %1`" in system
    plain = ScriptedProvider([Reply("Nothing to do.")])
    await run(Config(provider=plain, runner=LocalRunner()), [], "hi")
    assert "`wait %1`" not in plain.requests[0].system
