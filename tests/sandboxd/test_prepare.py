"""Preparing a session: POST /v1/sessions/{id}/start and SandboxRunner.prepare(), against a
real daemon (subprocess, real socket, real Docker)."""

from __future__ import annotations

import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from logos import AllowedPath, ExecOptions, run
from sandboxd.client.runner import SandboxRunner
from sandboxd.docker.ownership import LABEL_SESSION
from tests.support.sandboxd_harness import Daemon
from tests.support.scripted import Reply, ScriptedProvider, config_for

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]


def _session() -> str:
    return f"prep-{uuid.uuid4().hex[:8]}"


def _audit(daemon: Daemon, session: str) -> list[dict[str, Any]]:
    """The session's audit lines, in order."""
    lines = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    return [line for line in lines if line.get("session") == session]


def _containers(daemon: Daemon, session: str) -> list[str]:
    with daemon.client() as http:
        sessions = {s["id"]: s for s in http.get("/v1/sessions").json()["sessions"]}
    return list(sessions[session]["containers"]) if session in sessions else []


def _start(http: httpx.Client, session: str, **body: Any) -> httpx.Response:
    return http.post(f"/v1/sessions/{session}/start", json=body)


def test_the_start_request_starts_once_and_answers_a_repeat_at_once(daemon: Daemon) -> None:
    session = _session()
    with daemon.client() as http:
        first = _start(http, session)
        assert first.status_code == 200, first.text
        started = first.json()
        assert started["state"] == "started" and started["sandbox"], started
        assert list(started["steps"]) == ["image", "control_dir", "create", "start", "handshake"]
        again = _start(http, session)
        assert again.json() == {
            "session": session,
            "state": "running",
            "sandbox": started["sandbox"],
            "steps": {},
            "notice": None,
        }
        ran = http.post("/v1/run", json={"command": "hostname; id -u", "session": session})
        assert ran.json()["sandbox"] == started["sandbox"]
        assert _containers(daemon, session) == [started["sandbox"]]
        http.delete(f"/v1/sessions/{session}")
    start_line, repeat_line, run_line = _audit(daemon, session)[:3]
    assert start_line["path"] == f"/v1/sessions/{session}/start"
    assert start_line["start_steps"] == started["steps"]
    assert repeat_line["start_steps"] is None and run_line["start_steps"] is None


def test_a_start_while_another_is_under_way_answers_at_once(daemon: Daemon) -> None:
    for _ in range(_OVERLAP_TRIES):
        session = _session()
        (started, started_s), (repeat, repeat_s) = _two_starts(daemon, session)
        assert started["state"] == "started", started
        assert _containers(daemon, session) == [started["sandbox"]]
        with daemon.client() as http:
            http.delete(f"/v1/sessions/{session}")
        if repeat["state"] == "running":  # the first had ended before the repeat came
            assert repeat["sandbox"] == started["sandbox"], repeat
            continue
        assert repeat["state"] == "starting" and repeat["sandbox"] == "", repeat
        assert repeat_s < started_s
        return
    pytest.fail(f"in {_OVERLAP_TRIES} tries, each repeat came after the first start had ended")


_OVERLAP_TRIES = 5
"""The repeat is sent once the first start shows in /v1/health; a start quick enough to end
within that moment leaves nothing to overlap, and is tried again."""


def _two_starts(
    daemon: Daemon, session: str
) -> tuple[tuple[dict[str, Any], float], tuple[dict[str, Any], float]]:
    """A start, and a repeat sent once the first is under way: each answer and its time."""

    def start() -> tuple[dict[str, Any], float]:
        with daemon.client() as http:
            began = time.monotonic()
            response = _start(http, session)
            assert response.status_code == 200, response.text
            return response.json(), time.monotonic() - began

    with daemon.client() as http:

        def containers() -> int:
            count: int = http.get("/v1/health").json()["containers"]  # starting ones too
            return count

        before = containers()
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(start)
            while containers() == before and not first.done():  # until it is starting
                time.sleep(0.005)
            second = pool.submit(start)
            return first.result(), second.result()


def test_a_refused_start_is_the_same_refusal_as_a_run(daemon: Daemon, tmp_path: Path) -> None:
    session = _session()
    with daemon.client() as http:
        for body in (
            {"allowed_paths": [{"path": "/etc"}]},
            {"allowed_paths": [{"path": str(tmp_path / "missing")}]},
            {"network": True},
        ):
            start = _start(http, session, **body)
            run = http.post("/v1/run", json={"command": "true", "session": session, **body})
            assert start.status_code == run.status_code == 403, (body, start.text)
            assert start.json()["error"] == run.json()["error"]
        unknown = _start(http, session, command="true")
        assert unknown.status_code == 422 and "unknown field 'command'" in unknown.text
        bad = _start(http, "not a session id")
        assert bad.status_code == 400 and "is not a session id" in bad.text
        get = http.get(f"/v1/sessions/{session}/start")
        assert get.status_code == 405 and get.headers["allow"] == "POST"
    assert _containers(daemon, session) == []


@pytest.mark.anyio
async def test_prepare_then_run_uses_the_prepared_container(daemon: Daemon, tmp_path: Path) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath(str(tmp_path), read_only=False),))
    async with SandboxRunner(socket=daemon.socket, session=_session()) as runner:
        await runner.prepare(options)
        (prepared,) = _containers(daemon, runner.session)
        began = time.monotonic()
        result = await runner.run("pwd", options)
        first_s = time.monotonic() - began
        assert (result.stdout, result.error) == (f"{tmp_path}\n", None), result
        assert _containers(daemon, runner.session) == [prepared]
        start, run = _audit(daemon, runner.session)[-2:]
    assert start["path"].endswith("/start") and start["start_steps"], start
    assert run["path"] == "/v1/run" and run["start_steps"] is None, run
    # Far below a container's start (hundreds of ms): the command found it running.
    assert first_s < sum(start["start_steps"].values()) + 0.5, (first_s, start)


@pytest.mark.anyio
async def test_a_command_sent_while_preparing_waits_for_the_same_container(
    daemon: Daemon,
) -> None:
    async with SandboxRunner(socket=daemon.socket, session=_session()) as runner:
        results = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(runner.prepare, ExecOptions())
            await anyio.lowlevel.checkpoint()  # the preparation's request is on its way

            async def command(text: str) -> None:
                results.append(await runner.run(text, ExecOptions()))

            tasks.start_soon(command, "echo one")
            tasks.start_soon(command, "echo two")
        assert sorted(r.stdout for r in results) == ["one\n", "two\n"], results
        assert len(_containers(daemon, runner.session)) == 1
        lines = _audit(daemon, runner.session)
    started = [line for line in lines if line["start_steps"]]
    assert len(started) == 1 and started[0]["path"].endswith("/start"), lines


@pytest.mark.anyio
async def test_a_failed_preparation_is_the_first_commands_result(daemon: Daemon) -> None:
    refused = ExecOptions(allowed_paths=(AllowedPath("/etc"),))
    async with SandboxRunner(socket=daemon.socket, session=_session()) as runner:
        await runner.prepare(refused)  # no exception: the command reports it
        first = await runner.run("echo never", refused)
        assert first.exit_code is None and first.stdout == ""
        assert first.error is not None
        assert first.error.startswith(
            "the sandbox could not be prepared, so this command did not run: sandboxd "
            "refused to start the sandbox (403 path_refused): "
        ), first.error
        assert "/etc" in first.error
        # Said once: the next command asks the daemon itself.
        second = await runner.run("echo never", refused)
        assert second.error is not None
        assert second.error.startswith("sandboxd refused the command (403 path_refused)")
        assert _containers(daemon, runner.session) == []


@pytest.mark.anyio
async def test_a_preparation_without_a_daemon_is_reported_not_raised(tmp_path: Path) -> None:
    async with SandboxRunner(socket=tmp_path / "none.sock") as runner:
        await runner.prepare(ExecOptions())
        result = await runner.run("true", ExecOptions())
    assert result.error is not None
    assert "could not be prepared" in result.error and "sandboxd is not running" in result.error


@pytest.mark.anyio
async def test_closing_the_runner_cancels_its_preparation(
    docker_client: Any, daemon: Daemon
) -> None:
    runner = SandboxRunner(socket=daemon.socket, session=_session())
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(runner.prepare, ExecOptions())
        await anyio.sleep(0.05)  # the container is being created or started
        with anyio.fail_after(30):
            await runner.aclose()
    # Whatever the daemon had started for it is removed: the start was cancelled (its
    # container is removed as the cancelled start unwinds, maybe after the close answered),
    # or the session closed.

    def left() -> list[Any]:
        return docker_client.containers.list(
            all=True,
            filters={"label": f"{LABEL_SESSION}=u{os.getuid()}-{runner.session}"},
            ignore_removed=True,
        )

    # WHY a minute: an engine under load (a whole suite beside a model) has taken over 30 s
    # to remove a container; one never removed stays past any wait.
    deadline = time.monotonic() + 60
    while (_containers(daemon, runner.session) or left()) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert _containers(daemon, runner.session) == []
    assert left() == []


@pytest.mark.anyio
async def test_the_loop_has_the_container_running_before_the_first_block(daemon: Daemon) -> None:
    model_delay_s = 3.0  # a model slow to its first block, as real ones are
    provider = ScriptedProvider(
        [Reply("<cmd>hostname</cmd>", chunk=100, delay_s=model_delay_s), Reply("Done.")]
    )
    async with SandboxRunner(socket=daemon.socket, session=_session()) as runner:
        result = await run(config_for(provider, runner=runner), [], "what is its name?")
        start, command = _audit(daemon, runner.session)[:2]
    assert result.stop_reason == "final", result.error
    assert start["path"].endswith("/start") and start["start_steps"], start
    assert command["path"] == "/v1/run" and command["start_steps"] is None, command
    # The start had ended before the block closed and its command arrived.
    started_at = datetime.fromisoformat(start["time"]).timestamp()
    arrived_at = datetime.fromisoformat(command["time"]).timestamp()
    assert started_at + start["duration_s"] <= arrived_at, (start, command)
