"""sandboxd's SandboxRunner against a real daemon (subprocess, real socket, real Docker)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from logos import AllowedPath, ExecOptions, Runner
from sandboxd.client.runner import SandboxRunner
from tests.support.sandboxd_harness import Daemon, running_daemon, short_dir

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


def _sessions(daemon: Daemon) -> dict[str, dict[str, Any]]:
    with daemon.client() as http:
        return {s["id"]: s for s in http.get("/v1/sessions").json()["sessions"]}


async def test_it_is_a_runner_and_keeps_its_session_warm(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket) as runner:
        assert isinstance(runner, Runner)
        first = await runner.run("echo one", ExecOptions())
        second = await runner.run("echo two; exit 3", ExecOptions())
        assert (first.stdout, first.exit_code, first.error) == ("one\n", 0, None)
        assert (second.stdout, second.exit_code) == ("two\n", 3)
        assert len(_sessions(daemon)[runner.session]["containers"]) == 1
    assert runner.session not in _sessions(daemon)


async def test_options_map_to_the_request(daemon: Daemon, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "in" / "data").write_text("payload\n")
    os.environ["LOGOS_TEST_PARENT_ONLY"] = "leaked"
    try:
        options = ExecOptions(
            env={"GREETING": "hello", "API_TOKEN": "t"},
            allowed_paths=(
                AllowedPath(str(tmp_path / "in")),
                AllowedPath(str(tmp_path / "out"), read_only=False),
            ),
            workdir=str(tmp_path / "out"),
            inherit_env=True,
        )
        async with SandboxRunner(socket=daemon.socket) as runner:
            result = await runner.run(
                'cat ../in/data; echo "[$GREETING][$API_TOKEN][$LOGOS_TEST_PARENT_ONLY]" > o; '
                "cat o; pwd",
                options,
            )
    finally:
        del os.environ["LOGOS_TEST_PARENT_ONLY"]
    assert result.stdout == f"payload\n[hello][][]\n{tmp_path / 'out'}\n", result
    assert (tmp_path / "out" / "o").read_text() == "[hello][][]\n"


async def test_relative_paths_mean_the_callers_directory(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "data").write_text("here\n")
    monkeypatch.chdir(tmp_path)
    options = ExecOptions(allowed_paths=(AllowedPath("work"),), workdir="work")
    async with SandboxRunner(socket=daemon.socket) as runner:
        result = await runner.run("cat data; pwd", options)
    assert (result.stdout, result.error) == (f"here\n{tmp_path / 'work'}\n", None), result


async def test_truncated_output_is_saved_for_the_next_command(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket) as runner:
        big = await runner.run("seq 1 100000", ExecOptions(max_output_bytes=1000))
        assert big.stdout_dropped_bytes > 500_000 and big.stdout_file
        whole = await runner.run(f"wc -l < {big.stdout_file}", ExecOptions())
    assert whole.stdout.strip() == "100000"


async def test_a_timeout_comes_back_as_timed_out(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket) as runner:
        started = time.monotonic()
        result = await runner.run("sleep 60", ExecOptions(timeout_s=1))
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 30


async def test_a_policy_refusal_is_a_result_error(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket) as runner:
        result = await runner.run(
            "cat /etc/shadow", ExecOptions(allowed_paths=(AllowedPath("/etc"),))
        )
        network = await SandboxRunner(socket=daemon.socket, network=True).run("true", ExecOptions())
    assert result.exit_code is None and result.error is not None
    assert "403 path_refused" in result.error and "/etc" in result.error
    assert network.error is not None and "allow_network" in network.error


async def test_a_missing_daemon_is_a_result_error_with_the_fix() -> None:
    nowhere = short_dir() / "absent.sock"
    async with SandboxRunner(socket=nowhere) as runner:
        result = await runner.run("true", ExecOptions())
    assert result.error == (
        f"sandboxd is not running on {nowhere}: start it with `sandboxd serve --socket "
        f"{nowhere}`, or pass --socket PATH (or set $SANDBOXD_SOCKET) to reach a daemon that "
        "listens elsewhere"
    )


@pytest.mark.timeout(120)
async def test_a_daemon_that_dies_mid_command_is_a_result_error(docker_client: Any) -> None:
    with running_daemon(docker_client) as doomed:
        async with SandboxRunner(socket=doomed.socket) as runner:
            await runner.run("true", ExecOptions())

            async def kill_soon() -> None:
                await anyio.sleep(1.0)
                doomed.proc.send_signal(signal.SIGKILL)

            async with anyio.create_task_group() as group:
                group.start_soon(kill_soon)
                result = await runner.run("sleep 60", ExecOptions())
    assert result.error is not None and "broke while the command ran" in result.error


@pytest.mark.timeout(120)
async def test_cancelling_a_run_kills_the_command(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket, session="cancel-me") as runner:
        await runner.run("true", ExecOptions())
        with anyio.move_on_after(1.5):
            await runner.run("sleep 300", ExecOptions())
        deadline = time.monotonic() + 30
        while "sleep 300" in (await runner.run("ps -eo args", ExecOptions())).stdout:
            assert time.monotonic() < deadline, "the cancelled command kept running"
            await anyio.sleep(0.2)


@pytest.mark.timeout(120)
async def test_concurrent_runs_share_one_runner(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket) as runner:
        results: dict[int, str] = {}

        async def one(index: int) -> None:
            results[index] = (await runner.run(f"echo {index}", ExecOptions())).stdout

        async with anyio.create_task_group() as group:
            for index in range(16):
                group.start_soon(one, index)
    assert results == {index: f"{index}\n" for index in range(16)}


async def test_a_missing_image_is_a_result_error_with_the_fix(docker_client: Any) -> None:
    with running_daemon(docker_client, 'image = "sandboxd-test-missing:latest"\n') as serving:
        async with SandboxRunner(socket=serving.socket) as runner:
            result = await runner.run("true", ExecOptions())
    assert result.error is not None
    assert "503 image_missing" in result.error and "sandboxd build-image" in result.error


async def test_session_ids_are_checked_up_front() -> None:
    with pytest.raises(ValueError, match="not a session id"):
        SandboxRunner(socket="/tmp/x.sock", session="../../etc")


async def test_keeping_the_session_open_on_close(daemon: Daemon) -> None:
    async with SandboxRunner(socket=daemon.socket, session="kept", close_session=False) as runner:
        await runner.run("true", ExecOptions())
    assert "kept" in _sessions(daemon)
    with daemon.client() as http:
        assert http.delete("/v1/sessions/kept").status_code == 200


async def test_an_answer_that_is_not_json_is_a_result_error(tmp_path: Path) -> None:
    # A server on the socket that is not sandboxd: the runner must not crash.
    path = short_dir() / "other.sock"

    async def serve_garbage(listener: Any) -> None:
        async with await listener.accept() as stream:
            await stream.receive()
            await stream.send(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops")

    listener = await anyio.create_unix_listener(path)
    async with anyio.create_task_group() as group:
        group.start_soon(serve_garbage, listener)
        async with SandboxRunner(socket=path, close_session=False) as runner:
            result = await runner.run("true", ExecOptions())
        await listener.aclose()
    assert result.error == "sandboxd answered HTTP 502: oops"


async def test_text_that_cannot_be_sent_is_a_result_error() -> None:
    # Lone surrogates reach the loop from JSON escapes in a model's output; never a crash.
    nowhere = short_dir() / "absent.sock"
    async with SandboxRunner(socket=nowhere) as runner:
        in_env = await runner.run("echo $A", ExecOptions(env={"A": "\ud800"}))
        in_command = await runner.run("echo \udcff", ExecOptions())
    assert in_env.error is not None and "not valid Unicode" in in_env.error
    assert in_command.error is not None and in_command.error.startswith(
        "sandboxd cannot run this request: command: "
    )
