"""`logos batch --ray`: a real two-node Ray cluster on this machine (a head and a second node,
separate processes), the real command as the driver, the scripted model over real HTTP."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest

from tests.support.batch_model import project_task, run_what_is_asked, write_tasks
from tests.support.cli_harness import Home, logos, openai_env, read_jsonl, running_logos
from tests.support.processes import interrupt, processes_matching, wait_for
from tests.support.ray_cluster import ray_cluster
from tests.support.sse_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("project")
_STOP_FLAG_ASKED_S = 4.0
"""Long enough for a running task to ask its stop flag eight times."""


def waiting_batch(home: Home, sse_server: ScriptedServer, count: int) -> tuple[Path, Path]:
    """A batch of `count` tasks whose command waits until the file it names exists, for a
    model that runs what each task asks: the tasks file and that file's path."""
    sse_server.answer_with(run_what_is_asked)
    go_on = home.root / f"go-on-{random.randint(100_000, 999_999)}"
    tasks = write_tasks(
        home,
        *(
            project_task(f"t{n}", f"run: while ! test -e {go_on}; do sleep 0.1; done")
            for n in range(count)
        ),
    )
    return tasks, go_on


@pytest.mark.timeout(300)
def test_tasks_run_on_both_nodes_and_come_back_to_the_output_directory(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.answer_with(run_what_is_asked)
    tasks = write_tasks(
        home,
        *(
            {
                "id": f"t{n}",
                # WHY sleep: two tasks at a time keep both nodes (1 CPU each) busy
                "prompt": "run: sleep 1 && cp hello.txt done.txt",
                "workspace": {"copy": "project"},
                "check": "grep -q hello done.txt",
            }
            for n in range(6)
        ),
        project_task("fails", "run: true", check="test -f done.txt"),
    )
    with ray_cluster() as cluster:
        nodes = set(cluster.alive_node_ids())
        done = logos(
            [
                "batch",
                "--model",
                "m",
                str(tasks),
                "--out",
                "out",
                "--yes",
                "--ray",
                cluster.address,
            ],
            home,
            {**openai_env(home, sse_server), "PATH": cluster.env["PATH"]},
            timeout=240,
        )
    assert done.returncode == 1, done.stderr  # "fails" failed its check
    lines = read_jsonl(home.work / "out" / "results.jsonl")
    statuses = {line["id"]: line["status"] for line in lines}
    assert statuses == {**{f"t{n}": "passed" for n in range(6)}, "fails": "failed"}
    ran_on = {line["node"] for line in lines}
    assert ran_on == nodes and len(nodes) == 2  # both nodes ran tasks
    for line in lines:
        records = read_jsonl(home.work / "out" / line["trajectory"])
        assert records[0]["type"] == "run" and records[-1]["type"] == "done"
        assert "/logos-batch-" in records[0]["cwd"]  # a workspace in the node's scratch space
    assert "on the Ray cluster at" in done.stderr


@pytest.mark.timeout(360)
def test_a_node_lost_mid_batch_fails_its_task_with_the_reason_and_a_retry_reruns_it(
    home: Home, sse_server: ScriptedServer
) -> None:
    tasks, go_on = waiting_batch(home, sse_server, 2)
    args = ["batch", "--model", "m", str(tasks), "--out", "out", "--yes"]
    with ray_cluster() as cluster:
        env = {**openai_env(home, sse_server), "PATH": cluster.env["PATH"]}
        with running_logos([*args, "--ray", cluster.address], home, env) as driver:
            # one task on each node (1 CPU each), both waiting in their command
            assert wait_for(lambda: len(processes_matching(str(go_on))) >= 2)
            # and what they recorded so far (the run's header, the prompt) has come back
            sent = [home.work / "out" / "trajectories" / f"t{n}-1.jsonl" for n in range(2)]
            assert wait_for(lambda: all(path.exists() for path in sent))
            cluster.kill(cluster.second)
            results = home.work / "out" / "results.jsonl"
            assert wait_for(lambda: results.exists() and results.read_text().strip())
            go_on.touch()  # the task on the head goes on
            _, stderr = driver.communicate(timeout=120)
        assert driver.returncode == 1, stderr
        lines = {line["id"]: line for line in read_jsonl(results)}
        statuses = sorted(line["status"] for line in lines.values())
        assert statuses == ["error", "passed"], lines
        lost = next(line for line in lines.values() if line["status"] == "error")
        assert "node" in lost["error"].lower() and "Ray" in lost["error"]
        # the cluster finds out too (its health checks take a few seconds more)
        assert wait_for(lambda: lost["node"] not in cluster.alive_node_ids(), timeout=90)
        assert lost["trajectory"] is not None  # what it did before is kept
        assert (home.work / "out" / lost["trajectory"]).exists()

        # the cluster now has the head only: --retry-failed runs the lost task there
        again = logos([*args, "--ray", cluster.address, "--retry-failed"], home, env, timeout=120)
        assert again.returncode == 0, again.stderr
        latest = {line["id"]: line for line in read_jsonl(results)}
        assert latest[lost["id"]]["status"] == "passed"
        assert latest[lost["id"]]["attempt"] == 2
        assert "1 of 2 tasks to run" in again.stderr


@pytest.mark.timeout(60)
def test_ray_missing_says_how_to_install_it(home: Home, sse_server: ScriptedServer) -> None:
    hidden = home.root / "no-ray"
    (hidden / "ray").mkdir(parents=True)
    (hidden / "ray" / "__init__.py").write_text("raise ImportError('Ray is not installed')\n")
    tasks = write_tasks(home, project_task("a", "hi"))
    env = openai_env(home, sse_server)
    env["PYTHONPATH"] = f"{hidden}:{env['PYTHONPATH']}"
    done = logos(
        ["batch", "--model", "m", str(tasks), "--out", "out", "--yes", "--ray", "auto"], home, env
    )
    assert done.returncode == 2
    assert "pip install 'logos[ray]'" in done.stderr
    assert not sse_server.requests


@pytest.mark.timeout(300)
def test_ctrl_c_stops_running_ray_tasks_with_their_whole_trajectory(
    home: Home, sse_server: ScriptedServer
) -> None:
    tasks, go_on = waiting_batch(home, sse_server, 3)
    with ray_cluster() as cluster:
        args = ["batch", "--model", "m", str(tasks), "--out", "out", "--yes"]
        env = {**openai_env(home, sse_server), "PATH": cluster.env["PATH"]}
        with running_logos([*args, "--ray", cluster.address], home, env) as driver:
            # two tasks wait in their command (one per node); the third waits for a CPU,
            # also while the two ask their stop flag (Ray lends the CPU of a task blocked in
            # ray.get to a waiting one)
            assert wait_for(lambda: len(processes_matching(str(go_on))) >= 2)
            time.sleep(_STOP_FLAG_ASKED_S)
            assert len(processes_matching(str(go_on))) == 2
            _, stderr = interrupt(driver, signal.SIGINT, timeout=120)
    assert driver.returncode == 130, stderr
    assert processes_matching(str(go_on)) == []
    lines = read_jsonl(home.work / "out" / "results.jsonl")
    assert len(lines) == 2 and all(line["status"] == "canceled" for line in lines), lines
    for line in lines:
        assert line["stop_reason"] == "canceled" and line["steps"] == 1
        records = read_jsonl(home.work / "out" / line["trajectory"])
        assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"
        assert "the command was killed" in records[-2]["content"]
