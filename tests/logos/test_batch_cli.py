"""`logos batch` end to end: the real command in a subprocess, a real HTTP server playing a
model that runs what each task asks, real bash in real workspaces."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from logos.batch.summary import wilson_interval
from tests.support.batch_model import project_task, write_tasks
from tests.support.cli_harness import Home, logos, openai_env, read_jsonl
from tests.support.sse_server import ScriptedServer


def batch(home: Home, server: ScriptedServer, *args: str) -> Any:
    return logos(["batch", "--model", "m", *args], home, openai_env(home, server), timeout=120)


def refused(home: Home, server: ScriptedServer, tasks: Path, *args: str) -> str:
    """`logos batch TASKS --out out ARGS`, refused (exit status 2) before the model was asked
    anything or the output directory was made: what it said."""
    done = batch(home, server, str(tasks), "--out", "out", *args)
    assert done.returncode == 2, done.stderr
    assert not server.requests and not (home.work / "out").exists()
    return str(done.stderr)


def by_id(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["id"]: line for line in lines}


def test_tasks_run_in_fresh_workspaces_and_their_checks_decide(
    home: Home, project: Path, batch_model: ScriptedServer
) -> None:
    tasks = write_tasks(
        home,
        project_task("copies", "run: cp hello.txt done.txt", check="grep -q hello done.txt"),
        project_task("forgets", "run: true", check="test -f done.txt"),
        project_task(
            "set-up",
            "run: cat ready.txt",
            setup="echo ready > ready.txt",
            check="test -f ready.txt",
        ),
        project_task("bad-setup", "run: true", setup="echo no compiler >&2; exit 3"),
        project_task("answers", "say hi"),
    )
    done = batch(home, batch_model, str(tasks), "--out", "out", "--yes", "--workers", "3")
    assert done.returncode == 1, done.stderr  # not every task passed

    out = home.work / "out"
    results = by_id(read_jsonl(out / "results.jsonl"))
    assert {k: v["status"] for k, v in results.items()} == {
        "copies": "passed",
        "forgets": "failed",
        "set-up": "passed",
        "bad-setup": "error",
        "answers": "passed",
    }
    assert results["copies"]["success"] and not results["forgets"]["success"]
    assert results["forgets"]["check_exit_code"] == 1
    assert "exit code 1" in results["forgets"]["check_output"]
    assert "setup failed" in results["bad-setup"]["error"]
    assert "no compiler" in results["bad-setup"]["error"]
    assert results["bad-setup"]["trajectory"] is None  # the agent never started
    copies = results["copies"]
    assert copies["stop_reason"] == "final" and copies["steps"] == 2 and copies["attempt"] == 1
    assert copies["usage"]["output_tokens"] > 0 and copies["wall_s"] > 0
    assert copies["node"]
    # Each task got a fresh copy: the project itself is untouched, the workspaces are gone.
    assert sorted(p.name for p in project.iterdir()) == ["hello.txt"]
    assert not (out / "workspaces").exists() or not any((out / "workspaces").iterdir())
    # One trajectory per run, written as logos run writes them, private.
    trajectory = out / copies["trajectory"]
    records = read_jsonl(trajectory)
    assert [r["type"] for r in records][:2] == ["run", "prompt"]
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "final"
    step = next(r for r in records if r["type"] == "step" and r["role"] == "result")
    assert step["results"][0]["command"] == "cp hello.txt done.txt"
    assert records[0]["cwd"] != str(project)  # it worked in its own copy
    assert stat.S_IMODE(trajectory.stat().st_mode) == 0o600
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    # The summary: printed and written.
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["passed"], summary["failed"], summary["errors"]) == (3, 1, 1)
    assert summary["success_rate"] == pytest.approx(3 / 5)
    assert summary["success_ci95"] == pytest.approx(list(wilson_interval(3, 5)))
    assert summary["stop_reasons"] == {"final": 4, "not started": 1}
    assert "success 3/5 = 60.0%" in done.stderr
    assert "✓ copies" in done.stderr and "✗ forgets" in done.stderr


def test_bad_lines_are_reported_by_number_and_skipped(
    home: Home, project: Path, batch_model: ScriptedServer
) -> None:
    good = project_task("good", "say hi")
    tasks = write_tasks(
        home,
        good,
        '{"id": "broken", "prompt": ',
        {**good, "id": "typo", "chekc": "true"},
        good,
        {"id": "nowhere", "prompt": "say hi"},
        project_task("bad id!", "say hi"),
        {"id": "no-dir", "prompt": "say hi", "workspace": {"copy": "missing"}},
        "[1, 2]",
    )
    done = batch(home, batch_model, str(tasks), "--out", "out", "--yes", "--json")
    assert done.returncode == 1, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    problems = {e["line"]: e["message"] for e in events if e["type"] == "task_file_problem"}
    assert sorted(problems) == [2, 3, 4, 5, 6, 8]
    assert problems[2].startswith("not JSON")
    assert "unknown field 'chekc'" in problems[3]
    assert "duplicate id 'good' (first on line 1)" in problems[4]
    assert "missing field 'workspace'" in problems[5]
    assert "field 'id'" in problems[6]
    assert "not a JSON object" in problems[8]
    ends = {e["id"]: e for e in events if e["type"] == "task_end"}
    assert ends["good"]["status"] == "passed"
    assert ends["no-dir"]["status"] == "error" and "is not a directory" in ends["no-dir"]["error"]
    assert [e["type"] for e in events][-1] == "batch_done"
    assert events[-1]["bad_lines"] == 6 and events[-1]["tasks"] == 2


@pytest.mark.timeout(180)
def test_a_rerun_skips_what_is_done_and_retries_failures_when_asked(
    home: Home, project: Path, batch_model: ScriptedServer
) -> None:
    tasks = write_tasks(
        home,
        project_task("passes", "say hi"),
        project_task("fails", "run: true", check="test -f done.txt"),
    )
    args = (str(tasks), "--out", "out", "--yes")
    assert batch(home, batch_model, *args).returncode == 1
    requests = len(batch_model.requests)

    again = batch(home, batch_model, *args)
    assert again.returncode == 1, again.stderr
    assert "0 of 2 tasks to run, 2 done earlier" in again.stderr
    assert len(batch_model.requests) == requests  # no model call: nothing ran again

    retried = batch(home, batch_model, *args, "--retry-failed")
    assert retried.returncode == 1
    lines = read_jsonl(home.work / "out" / "results.jsonl")
    assert sorted((line["id"], line["attempt"]) for line in lines) == [
        ("fails", 1),
        ("fails", 2),
        ("passes", 1),
    ]
    assert (home.work / "out" / "trajectories" / "fails-2.jsonl").exists()
    assert (home.work / "out" / "trajectories" / "fails-1.jsonl").exists()


@pytest.mark.timeout(60)
def test_local_commands_need_yes_and_images_need_the_sandbox(
    home: Home, project: Path, sse_server: ScriptedServer
) -> None:
    tasks = write_tasks(home, project_task("a", "hi", image="python:3"))
    unasked = refused(home, sse_server, tasks)
    assert "pass --sandbox" in unasked and "--yes" in unasked
    assert "add --sandbox" in refused(home, sse_server, tasks, "--yes")


@pytest.mark.timeout(60)
def test_the_sandbox_kind_comes_from_the_flag_or_the_config_file(
    home: Home, project: Path, sse_server: ScriptedServer
) -> None:
    tasks = write_tasks(home, project_task("a", "hi"))
    # temenos is a sandbox kind, but not one a batch can run in: refused by name, before
    # the model is asked anything or the output directory is made.
    temenos = refused(home, sse_server, tasks, "--sandbox", "temenos")
    assert "a batch cannot run in the sandbox kind 'temenos'" in temenos
    assert "BatchSandboxKind" in temenos and "--yes" in temenos
    config = home.root / "config" / "logos" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('sandbox = "temenos"\n')
    assert "sandbox kind 'temenos'" in refused(home, sse_server, tasks)
    # The flag wins over the config file: sandboxd is asked for, and its own check speaks.
    missing = home.root / "runtime" / "no-daemon.sock"
    sandboxd = refused(
        home, sse_server, tasks, "--sandbox", "sandboxd", "--sandbox-addr", str(missing)
    )
    assert f"sandboxd is not running on {missing}" in sandboxd
    unknown = refused(home, sse_server, tasks, "--sandbox=no-such-kind")
    assert "unknown sandbox kind 'no-such-kind'" in unknown


def test_tasks_neither_see_nor_keep_the_users_memory_notes(
    home: Home, project: Path, batch_model: ScriptedServer
) -> None:
    env = openai_env(home, batch_model)
    saved = logos(["memory", "set", "deploy", "the user's own note"], home, env)
    assert saved.returncode == 0, saved.stderr
    tasks = write_tasks(home, project_task("remembers", "run: remember answer: 42"))
    done = batch(home, batch_model, str(tasks), "--out", "out", "--yes")
    assert done.returncode == 0, done.stderr
    system = batch_model.requests[0].json["messages"][0]
    assert system["role"] == "system"
    assert "the user's own note" not in system["content"]
    assert "remember build command" not in system["content"]  # no memory commands offered
    # The model's `remember` was no loop command: bash ran it, and it does not exist there.
    result = batch_model.requests[1].json["messages"][-1]["content"]
    assert "remember: command not found" in result, result
    listed = logos(["memory", "list"], home, env)
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["deploy"]
