"""Ctrl-C on `logos batch`: a real SIGINT to the real command stops the running tasks, records
them as canceled, loses nothing done, leaves no process behind; a re-run picks up the rest."""

from __future__ import annotations

import json
import random
import signal

import pytest

from tests.support.batch_model import project_task, write_tasks
from tests.support.cli_harness import Home, logos, openai_env, read_jsonl, running_logos
from tests.support.processes import interrupt, processes_matching, wait_for
from tests.support.sse_server import ScriptedServer


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("project")
def test_ctrl_c_cancels_running_tasks_and_a_rerun_finishes_the_batch(
    home: Home, batch_model: ScriptedServer
) -> None:
    go_on = home.root / "go-on"
    marker = f"sleep {random.randint(100_000, 999_999)}.{random.randint(100_000, 999_999)}"
    slow = f"run: test -e {go_on} || {marker}"
    tasks = write_tasks(
        home,
        project_task("quick", "say hi"),
        *({"id": f"slow-{n}", "prompt": slow, "workspace": {"copy": "project"}} for n in (1, 2, 3)),
    )
    args = ["batch", "--model", "m", str(tasks), "--out", "out", "--yes", "--workers", "2"]
    env = openai_env(home, batch_model)
    results = home.work / "out" / "results.jsonl"
    with running_logos(args, home, env) as proc:
        # quick ends; two slow tasks run their sleep; the third waits for a worker
        assert wait_for(lambda: len(processes_matching(marker)) >= 2), "the sleeps never ran"
        assert wait_for(lambda: results.exists() and "quick" in results.read_text())
        _, stderr = interrupt(proc, signal.SIGINT, timeout=60)
    assert proc.returncode == 130, stderr
    assert "stopping (SIGINT)" in stderr
    assert wait_for(lambda: processes_matching(marker) == [], timeout=10)

    lines = read_jsonl(results)
    statuses = {line["id"]: line["status"] for line in lines}
    canceled = sorted(task for task, status in statuses.items() if status == "canceled")
    assert statuses["quick"] == "passed" and len(canceled) == 2, statuses
    assert len(statuses) == 3  # the task that never started has no line
    for line in lines:
        if line["status"] == "canceled":
            # what it did before Ctrl-C is in its trajectory: the command it ran, killed
            records = read_jsonl(home.work / "out" / line["trajectory"])
            assert any(
                r["type"] == "step" and r["role"] == "result" and "killed" in r["content"]
                for r in records
            ), records
    summary = json.loads((home.work / "out" / "summary.json").read_text())
    assert (summary["passed"], summary["canceled"], summary["not_run"]) == (1, 2, 1)

    go_on.touch()
    again = logos(args, home, env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "3 of 4 tasks to run, 1 done earlier" in again.stderr
    latest = {line["id"]: line for line in read_jsonl(results)}
    assert all(line["status"] == "passed" for line in latest.values())
    assert sorted(latest[task]["attempt"] for task in latest if task != "quick") == [1, 2, 2]
