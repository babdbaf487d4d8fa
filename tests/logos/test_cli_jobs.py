"""Jobs through the `logos` command: the real command in a subprocess, a real HTTP server
streaming scripted replies, real bash."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from logos.records.events import EVENT_ADAPTER
from logos.records.trajectory import load_trajectory
from tests.support.cli_harness import Home, logos, run_task
from tests.support.sse_server import ScriptedServer, openai_stream


def _system_prompt(server: ScriptedServer) -> str:
    [system] = [m for m in server.requests[0].json["messages"] if m["role"] == "system"]
    content: str = system["content"]
    return content


def _slow_then_wait(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        openai_stream("Building.\n<cmd>echo started; sleep 1.5; echo built</cmd>"),
        openai_stream("Waiting.\n<cmd>wait %1</cmd>"),
        openai_stream("It built."),
    )


@pytest.mark.timeout(60)
def test_json_and_the_trajectory_record_a_jobs_start_and_end(
    home: Home, sse_server: ScriptedServer
) -> None:
    _slow_then_wait(sse_server)
    done = run_task(home, sse_server, "--json", "--background-after", "0.5", "build it")
    assert done.returncode == 0, done.stderr
    raw = [json.loads(line) for line in done.stdout.splitlines()]
    for line in done.stdout.splitlines():
        EVENT_ADAPTER.validate_json(line)
    [started] = [event for event in raw if event["type"] == "job_start"]
    assert (started["turn"], started["index"], started["id"]) == (1, 0, "1")
    assert started["command"].startswith("echo started") and started["stdout_file"]
    [ended] = [event for event in raw if event["type"] == "job_end"]
    assert ended["id"] == "1" and ended["seen"] is True
    assert ended["result"]["stdout"] == "built\n" and ended["result"]["exit_code"] == 0
    first_result = next(event for event in raw if event["type"] == "command_result")
    assert first_result["result"]["job"]["id"] == "1"
    assert "`wait %1` waits for job 1" in _system_prompt(sse_server)

    records = home.run_records()
    kinds = [record["type"] for record in records]
    assert kinds.index("job_start") < kinds.index("job_end") < kinds.index("done")
    trajectory = load_trajectory(home.only_run())
    step_with_end = next(step for step in trajectory.steps if step.job_ends)
    assert step_with_end.job_ends[0].result.stdout == "built\n"
    shown = subprocess.run(
        [sys.executable, "-m", "logos", "show", str(home.only_run())],
        capture_output=True,
        text=True,
        env=home.env(),
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "job 1, running" in shown.stdout and "job 1 echo started" in shown.stdout


@pytest.mark.timeout(60)
def test_people_see_a_job_start_and_its_end(home: Home, sse_server: ScriptedServer) -> None:
    _slow_then_wait(sse_server)
    done = run_task(home, sse_server, "--background-after", "0.5", "build it")
    assert done.returncode == 0, done.stderr
    assert "→ echo started; sleep 1.5; echo built  job 1, running" in done.stderr
    assert "✓ job 1 echo started; sleep 1.5; echo built" in done.stderr
    assert done.stderr.index("job 1, running") < done.stderr.index("✓ job 1")


@pytest.mark.timeout(60)
def test_a_job_left_running_is_stopped_and_shown_so(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>sleep 300</cmd>"),
        openai_stream("Done."),
        openai_stream("Done, really."),
    )
    done = run_task(home, sse_server, "--background-after", "0.5", "go")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done, really.\n"
    assert "stopped as the run ended" in done.stderr
    [end] = [record for record in home.run_records() if record["type"] == "job_end"]
    assert end["seen"] is False and end["result"]["signal"] == 15


@pytest.mark.parametrize("value", ["0", "-3"])
def test_background_after_must_be_positive(home: Home, value: str) -> None:
    done = logos(["--background-after", value, "--yes", "go"], home, home.env(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert f"--background-after: must be a positive number, got {value}" in done.stderr


def test_the_config_file_sets_background_after_and_refuses_zero(
    home: Home, sse_server: ScriptedServer
) -> None:
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text("background_after = 0\n")
    refused = logos(["--yes", "go"], home, home.env(OPENAI_API_KEY="k"))
    assert refused.returncode == 2
    assert "background_after" in refused.stderr and "greater than 0" in refused.stderr
    home.config_file.write_text("background_after = 45\n")
    sse_server.enqueue(openai_stream("Nothing to run."), openai_stream("Nothing to run."))
    done = run_task(home, sse_server, "go")
    assert done.returncode == 0, done.stderr
    assert "still running after 45 s goes on as a job" in _system_prompt(sse_server)


@pytest.mark.timeout(60)
def test_logos_exec_never_makes_a_job(home: Home) -> None:
    done = logos(
        ["exec", "--yes", "--background-after", "0.2"],
        home,
        home.env(),
        stdin="<cmd>sleep 1; echo whole</cmd>",
    )
    assert done.returncode == 0, done.stderr
    assert "whole" in done.stdout and "job" not in done.stdout
