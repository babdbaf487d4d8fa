"""`logos batch --sandbox`: the local pool through a real sandboxd on the real engine. Each task
gets its own session that sees only its workspace; the pool keeps within the session cap,
and a sandbox full of another program's sessions delays tasks instead of failing them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sandboxd.docker.ownership import LABEL_STATE
from tests.support.batch_model import (
    passed_results,
    project_task,
    sandboxed_batch,
    write_tasks,
)
from tests.support.cli_harness import Home, read_jsonl
from tests.support.sandboxd_harness import running_daemon, state_id
from tests.support.sse_server import ScriptedServer

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


def test_sandboxed_tasks_see_only_their_workspace_and_wait_out_a_full_sandbox(
    docker_client: Any, home: Home, project: Path, batch_model: ScriptedServer
) -> None:
    secret = home.work / "secret.txt"
    secret.write_text("not for tasks\n")
    # The command proves where it runs: the task's copy is there, the project and its
    # neighbours are not (the sandbox mounts the workspace only).
    prompt = f"run: test ! -e {secret} && test ! -e {project} && cp hello.txt done.txt"
    tasks = write_tasks(
        home,
        *(
            project_task(
                f"t{n}",
                prompt,
                setup="echo set > setup.txt",
                check="grep -q hello done.txt && test -f setup.txt",
            )
            for n in range(4)
        ),
    )
    config = "max_sessions = 8\nmax_sessions_per_caller = 2\n"
    with running_daemon(docker_client, config) as daemon:
        holder = daemon.client()
        # Another program of the same user holds one of the two sessions all along: the two
        # workers' first sessions come at once, so one is refused (429) and must wait for
        # the other task's session to end. WHY not released on a timer: on a loaded machine
        # the batch may start only after it, and then nothing is ever refused.
        held = holder.post("/v1/run", json={"command": "true", "session": "holder"})
        assert held.status_code == 200, held.text
        done = sandboxed_batch(home, batch_model, tasks, daemon, "--workers", "4")
        assert done.returncode == 0, done.stderr
        assert "2 tasks at once, not 4" in done.stderr
        assert "the sandbox is full (429" in done.stderr
        lines = passed_results(home, ["t0", "t1", "t2", "t3"])
        # every task's session was closed when the task ended
        holder.delete("/v1/sessions/holder")
        deadline = time.monotonic() + 30
        while daemon.containers(docker_client) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert daemon.containers(docker_client) == []
    trajectory = read_jsonl(home.work / "out" / lines[0]["trajectory"])
    assert trajectory[0]["runner"] == "sandbox"
    assert trajectory[0]["sandbox"] == "sandboxd"  # the kind `--sandbox` alone names
    assert "sees only these host paths" in trajectory[0]["system_prompt"]


@pytest.mark.usefixtures("project")
def test_a_task_whose_agent_runs_no_command_gets_one_container_for_its_check(
    docker_client: Any, home: Home, batch_model: ScriptedServer
) -> None:
    # The model answers at once: the agent's run ends while its sandbox is still starting.
    # The task's start goes on for its check instead of being cut short and made again.
    tasks = write_tasks(home, *(project_task(f"t{n}", "say hi", check="true") for n in range(3)))
    with running_daemon(docker_client) as daemon:
        since = time.time()
        done = sandboxed_batch(home, batch_model, tasks, daemon, "--workers", "3")
        assert done.returncode == 0, done.stderr
        events = docker_client.events(
            since=since,
            until=time.time() + 1,
            # The daemon's sandboxes carry its state directory's id (they outlive it).
            filters={
                "type": "container",
                "event": "create",
                "label": f"{LABEL_STATE}={state_id(daemon.state_dir)}",
            },
            decode=True,
        )
        created = list(events)
    passed_results(home, ["t0", "t1", "t2"])
    assert len(created) == 3, created
