"""`logos batch --prepare`: every task's sandbox session is a fork of one session prepared
once, through a real sandboxd on the real engine; a preparation that fails stops the batch
before any task, and a prepared session the daemon removed is prepared again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from logos.batch.prepared import PreparedSession, PrepareError
from logos.batch.settings import BatchSandbox
from logos.options import AllowedPath, ExecOptions
from logos.runners.sandboxes import SandboxSettings
from sandboxd.client.kind import SANDBOXD
from tests.support.batch_model import (
    passed_results,
    project_task,
    sandboxed_batch,
    write_tasks,
)
from tests.support.cli_harness import Home, logos, openai_env, read_jsonl
from tests.support.sandboxd_harness import running_daemon
from tests.support.sse_server import ScriptedServer

PREPARE = "mkdir -p ~/tools && echo v1 > ~/tools/version && echo once >> /tmp/prepared"


@pytest.mark.docker
@pytest.mark.timeout(300)
@pytest.mark.usefixtures("project")
def test_every_task_starts_from_a_copy_of_the_prepared_session_and_keeps_its_own(
    docker_client: Any, home: Home, batch_model: ScriptedServer
) -> None:
    # Each task sees the preparation (made once), its own workspace, and no other task's
    # leftovers in /tmp: its session is a copy of the prepared one, not a shared sandbox.
    prompt = (
        "run: cat ~/tools/version /tmp/prepared > seen.txt && cp hello.txt done.txt "
        "&& touch /tmp/task-$(basename $PWD) && ls /tmp | grep -c '^task-' > tasks.txt"
    )
    tasks = write_tasks(
        home,
        *(
            project_task(
                f"t{n}",
                prompt,
                check='test "$(cat seen.txt)" = "$(printf \'v1\\nonce\')" '
                "&& grep -qx 1 tasks.txt && grep -q hello done.txt",
            )
            for n in range(4)
        ),
    )
    with running_daemon(docker_client, "max_sessions_per_caller = 8\n") as daemon:
        done = sandboxed_batch(
            home, batch_model, tasks, daemon, "--workers", "3", "--prepare", PREPARE
        )
        assert done.returncode == 0, done.stderr
        assert "preparing the sandbox session" in done.stderr
        assert "prepared in" in done.stderr
        passed_results(home, ["t0", "t1", "t2", "t3"])
        # the prepared session is closed with the batch, as every task's was
        assert daemon.client().get("/v1/sessions").json()["sessions"] == []


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_a_failed_preparation_stops_the_batch_before_any_task(
    docker_client: Any, home: Home, batch_model: ScriptedServer
) -> None:
    tasks = write_tasks(home, project_task("t0", "run: true"))
    with running_daemon(docker_client) as daemon:
        done = sandboxed_batch(
            home,
            batch_model,
            tasks,
            daemon,
            *("--prepare", "echo the mirror is down >&2; exit 3"),
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "the preparation" in done.stderr and "failed" in done.stderr
        assert "the mirror is down" in done.stderr and "no task ran" in done.stderr
        assert read_jsonl(home.work / "out" / "results.jsonl") == []
        assert daemon.client().get("/v1/sessions").json()["sessions"] == []
    assert batch_model.requests == []


def test_prepare_needs_a_local_sandbox(home: Home, sse_server: ScriptedServer) -> None:
    tasks = write_tasks(home, project_task("t0", "run: true"))
    for extra, expected in (
        (["--yes"], "--prepare prepares a sandbox session: add --sandbox"),
        (["--sandbox", "--ray", "127.0.0.1:1"], "give each task a setup instead"),
    ):
        done = logos(
            ["batch", "--model", "m", str(tasks), "--out", "out", "--prepare", "true", *extra],
            home,
            openai_env(home, sse_server),
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr, done.stderr


@pytest.mark.docker
@pytest.mark.timeout(180)
def test_a_prepared_session_the_daemon_removed_is_prepared_again(
    docker_client: Any, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    workspace.chmod(0o777)
    options = ExecOptions(allowed_paths=(AllowedPath(str(workspace), read_only=False),))

    async def scenario(socket: str) -> tuple[str, float]:
        sandbox = BatchSandbox("sandboxd", SandboxSettings(socket=socket))
        prepared = PreparedSession(SANDBOXD, sandbox, PREPARE, ExecOptions())
        async with prepared:
            await prepared.start()
            first = prepared.duration_s
            http = daemon.client()  # blocking, and nothing else runs meanwhile
            listed = http.get("/v1/sessions").json()["sessions"]
            assert len(listed) == 1
            assert http.delete(f"/v1/sessions/{listed[0]['id']}").status_code == 200
            forked = await prepared.fork(options)
            async with forked:
                seen = await forked.run("cat /tmp/prepared ~/tools/version", options)
        return seen.stdout, first

    with running_daemon(docker_client) as daemon:
        stdout, first = anyio.run(scenario, str(daemon.socket))
    assert stdout == "once\nv1\n"
    assert first > 0


@pytest.mark.docker
@pytest.mark.timeout(120)
def test_a_fork_the_sandbox_refuses_says_why(docker_client: Any) -> None:
    async def scenario(socket: str) -> str:
        sandbox = BatchSandbox("sandboxd", SandboxSettings(socket=socket))
        prepared = PreparedSession(SANDBOXD, sandbox, "true", ExecOptions())
        async with prepared:
            await prepared.start()
            outside = ExecOptions(allowed_paths=(AllowedPath("/proc", read_only=True),))
            with pytest.raises(ValueError) as refused:
                await prepared.fork(outside)
        return str(refused.value)

    with running_daemon(docker_client) as daemon:
        message = anyio.run(scenario, str(daemon.socket))
    assert message.startswith("cannot fork the batch's prepared session: sandboxd refused")


def test_a_session_never_prepared_cannot_be_forked() -> None:
    sandbox = BatchSandbox("sandboxd", SandboxSettings(socket="/nonexistent/sd.sock"))
    prepared = PreparedSession(SANDBOXD, sandbox, "true", ExecOptions())
    with pytest.raises(PrepareError, match="not prepared"):
        anyio.run(prepared.fork, ExecOptions())
