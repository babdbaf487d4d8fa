"""Attack, through the fronts that narrow a caller's paths: a path granted inside a ceiling is
made to lead outside it after the front checked it. A project's captain (read-write on the
project) turns the directory a talon was given into a symlink to a sibling of the project; a
served run's directory, and a batch task's workspace, are swapped the same way between two
commands of their agent (the sandbox runs already: each command is checked again). Each
front sends its ceiling (pinned when it granted the paths) with every request, and the real
daemon refuses the mount: nothing outside is written, and the refusal names the path and the
root. (`sandboxd mcp`'s: tests/security/test_mcp_attacks.py.)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.batch_model import project_task, sandboxed_batch, write_tasks
from tests.support.cli_harness import Home, read_jsonl
from tests.support.project_harness import ProjectClient, of_type
from tests.support.sandboxd_harness import Daemon
from tests.support.serve_harness import read_events, sandboxd_config, serving
from tests.support.sse_server import RecordedRequest, Reply, ScriptedServer, openai_stream

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

REFUSED = "path_outside_ceiling"


def outside_of(home: Home) -> Path:
    """A directory beside the granted ones, which no front granted."""
    outside = home.root / "outside"
    outside.mkdir()
    (outside / "which").write_text("OUTSIDE\n")
    return outside


def swap_for_a_symlink(directory: Path, target: Path) -> None:
    """What an attacker with write access to its parent does: the directory goes, a symlink
    to `target` takes its name."""
    shutil.rmtree(directory)
    directory.symlink_to(target)


def swapping_model(target: Callable[[], Path], outside: Path) -> Callable[[RecordedRequest], Reply]:
    """A model whose first command reads the granted directory `target()` names (its sandbox
    then runs), which it swaps for a symlink to `outside` before its second command, one that
    writes a canary where the name now leads (a sandbox mounts what a name resolves to where
    it resolves to); then it answers."""
    seen: list[Path] = []

    def answer(request: RecordedRequest) -> Reply:
        if not seen:
            seen.append(path := target())
            return openai_stream(f"<cmd>cat {path}/which</cmd>")
        if len(seen) == 1:
            seen.append(path := seen[0])
            swap_for_a_symlink(path, outside)
            return openai_stream(f"<cmd>{write_canary(path, outside)}</cmd>")
        return openai_stream("I could not.")

    return answer


def write_canary(path: Path, outside: Path) -> str:
    """A command that leaves a canary in `outside` if its sandbox mounted it, whether at the
    name `path` or where that name leads."""
    return f"cat {path}/which; echo x > {path}/canary; echo x > {outside}/canary"


def test_a_captain_cannot_lead_a_talons_sandbox_out_of_the_project(
    home: Home, daemon: Daemon, sse_server: ScriptedServer
) -> None:
    project_dir = home.work / "proj"
    (project_dir / "sub").mkdir(parents=True)
    (project_dir / "sub" / "which").write_text("real\n")
    outside = home.work / "outside"
    outside.mkdir()
    (outside / "which").write_text("OUTSIDE\n")
    sub = project_dir / "sub"
    sse_server.enqueue(
        openai_stream(f"<cmd>rm -rf {sub} && ln -s ../outside {sub} && echo swapped</cmd>"),
        openai_stream("Done.\n@talon write the canary"),
        openai_stream(f"<cmd>{write_canary(sub, outside)}</cmd>"),
        openai_stream("I could not."),
    )
    with serving(home, sse_server, config=sandboxd_config(daemon.socket)) as served:
        project = ProjectClient.create(
            served.client(), allowed_paths=[{"path": str(project_dir), "read_only": False}]
        )
        project.add("boss", "captain", runner={"kind": "sandbox"})
        talon = {"kind": "sandbox", "allowed_paths": [{"path": str(sub), "read_only": False}]}
        project.add("talon", runner=talon)
        events = project.ask("swap it")
    assert not (outside / "canary").exists(), "the talon's sandbox mounted the outside directory"
    results = [
        (e["agent"], e["event"]["result"])
        for e in of_type(events, "command")
        if e["event"]["type"] == "command_result"
    ]
    assert [agent for agent, _ in results] == ["boss", "talon"], results
    assert results[0][1]["stdout"] == "swapped\n", results[0]
    error = results[1][1]["error"]
    assert error is not None and REFUSED in error, results[1]
    assert f"refused {sub} (resolves to {outside}): it is outside" in error
    assert f"granted to this caller ({project_dir} (read-write))" in error


def test_a_served_runs_directory_swapped_once_it_started_is_never_mounted(
    home: Home, daemon: Daemon, sse_server: ScriptedServer
) -> None:
    sub = home.work / "sub"
    sub.mkdir()
    (sub / "which").write_text("real\n")
    outside = outside_of(home)

    sse_server.answer_with(swapping_model(lambda: sub, outside))
    runner = {"kind": "sandbox", "allowed_paths": [{"path": str(sub), "read_only": False}]}
    with serving(home, sse_server, config=sandboxd_config(daemon.socket)) as served:
        client = served.client()
        started = served.start_run(client, prompt="write the canary", runner=runner)
        events = read_events(client, started["run"])
        # A run asking for it now is refused at once, in the same words.
        again = client.post("/v1/runs", json={"prompt": "again", "runner": runner})
    assert not (outside / "canary").exists(), "the run's sandbox mounted the outside directory"
    before, result = [e.data["result"] for e in events if e.type == "command_result"]
    assert before["stdout"] == "real\n", before
    assert result["error"] is not None and REFUSED in result["error"], result
    refusal = f"refused {sub} (resolves to {outside}): it is outside the paths granted"
    assert refusal in result["error"]
    assert f"({home.work} (read-write))" in result["error"]
    assert again.status_code == 403 and refusal in again.json()["error"], again.text


def test_a_batch_tasks_workspace_swapped_once_made_is_never_mounted(
    home: Home, daemon: Daemon, sse_server: ScriptedServer, project: Path
) -> None:
    outside = outside_of(home)
    workspaces = home.work / "out" / "workspaces"

    def workspace() -> Path:
        (made,) = workspaces.iterdir()
        return made

    sse_server.answer_with(swapping_model(workspace, outside))
    tasks = write_tasks(home, project_task("t0", "write the canary", check="test -f canary"))
    done = sandboxed_batch(home, sse_server, tasks, daemon, "--keep-workspaces")
    assert not (outside / "canary").exists(), "the task's sandbox mounted the outside directory"
    assert done.returncode != 0, done.stderr
    (line,) = read_jsonl(home.work / "out" / "results.jsonl")
    assert line["status"] != "passed", line
    records = read_jsonl(home.work / "out" / line["trajectory"])
    before, result = [
        r for record in records if record["type"] == "step" for r in record["results"]
    ]
    assert before["exit_code"] == 1 and "No such file" in before["stderr"], before
    made = workspace()
    assert result["error"] is not None and REFUSED in result["error"], result
    assert f"refused {made} (resolves to {outside}): it is outside" in result["error"]
    assert f"({made} (read-write))" in result["error"]
