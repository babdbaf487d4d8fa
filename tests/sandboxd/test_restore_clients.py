"""Clients ride through a restart of the daemon: SandboxRunner (and `sandboxd mcp` and the
logos sandbox kind through it) and the temenos client send a request again while the
daemon's socket refuses connections, once they have reached it; a command whose request may
have reached the daemon that went away is reported as unknown, never run twice; a session
whose sandbox was lost says so, and goes on in a fresh one.

Real daemons killed (`kill -9`) and started again on the same socket and state directory.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from logos import ExecOptions
from logos.temenos.runner import TemenosRunner
from sandboxd.client.runner import SandboxRunner
from tests.support.processes import processes_matching, until_gone
from tests.support.restarts import Daemons, restartable
from tests.support.sandboxd_harness import short_dir

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.timeout(240)]

DOWN_S = 2.0
"""How long the daemon stays away before it is started again."""


def _back_later(daemons: Daemons) -> threading.Thread:
    """The daemon started again DOWN_S from now, from a thread (the test's request waits)."""

    def start() -> None:
        time.sleep(DOWN_S)
        daemons.start()

    thread = threading.Thread(target=start)
    thread.start()
    return thread


async def test_a_runner_s_command_waits_for_the_daemon_to_come_back(docker_client: Any) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        async with SandboxRunner(socket=daemons.socket) as runner:
            assert (await runner.run("echo a > /tmp/a", ExecOptions())).ok
            daemons.kill()
            back = _back_later(daemons)
            result = await runner.run("cat /tmp/a", ExecOptions())
            back.join()
            assert (result.stdout, result.error) == ("a\n", None), result


async def test_a_command_the_killed_daemon_was_running_is_unknown_not_run_again(
    docker_client: Any, marker: str
) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        async with SandboxRunner(socket=daemons.socket) as runner:
            assert (await runner.run("true", ExecOptions())).ok
            results = []

            async def long_command() -> None:
                command = f"echo ran >> /tmp/ran; sleep {marker}"
                results.append(await runner.run(command, ExecOptions(timeout_s=120)))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_command)
                with anyio.fail_after(30):
                    while not processes_matching(f"sleep {marker}"):
                        await anyio.sleep(0.05)
                daemons.kill()
            (result,) = results
            assert result.error is not None and result.exit_code is None, result
            assert "whether the command ran" in result.error and "not run again" in result.error
            with anyio.fail_after(30):
                await until_gone(f"sleep {marker}")  # its supervisor stopped it
            daemons.start()
            ran = await runner.run("cat /tmp/ran", ExecOptions())
            assert ran.stdout == "ran\n", "the command ran once, and only once"


async def test_a_runner_s_job_is_answered_by_the_next_daemon(docker_client: Any) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        async with SandboxRunner(socket=daemons.socket) as runner:
            options = ExecOptions(background_after_s=0.5)
            started = await runner.run("echo one; sleep 3; echo two", options)
            assert started.job is not None and started.stdout == "one\n", started
            daemons.kill()
            daemons.start()
            end = await runner.wait_job(started.job.id, 30)
            assert end is not None and end.result.exit_code == 0, end
            assert end.result.stdout == "two\n"


async def test_a_lost_session_says_so_once_and_goes_on_in_a_fresh_sandbox(
    docker_client: Any,
) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        async with SandboxRunner(socket=daemons.socket) as runner:
            first = await runner.run("echo x > /tmp/x; hostname", ExecOptions())
            assert first.ok
            daemons.kill()
            (container,) = daemons.kept()
            container.remove(force=True)
            daemons.start()
            lost = await runner.run("cat /tmp/x", ExecOptions())
            assert lost.error is not None and "lost its sandbox" in lost.error, lost
            assert "was removed while no daemon ran" in lost.error
            assert "This session's next command runs in a fresh, empty sandbox" in lost.error
            fresh = await runner.run("cat /tmp/x; echo on", ExecOptions())
            assert fresh.stdout == "on\n" and "No such file" in fresh.stderr, fresh
            assert (await runner.run("echo again", ExecOptions())).stdout == "again\n"


async def test_a_runner_that_never_reached_a_daemon_does_not_wait_for_one() -> None:
    socket = short_dir("nd") / "none.sock"
    began = time.monotonic()
    async with SandboxRunner(socket=socket) as runner:
        result = await runner.run("true", ExecOptions())
    assert result.error is not None and "sandboxd is not running" in result.error
    assert time.monotonic() - began < 10


async def test_the_temenos_client_waits_for_the_daemon_to_come_back(docker_client: Any) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        runner = TemenosRunner(str(daemons.socket))
        try:
            assert (await runner.run("echo before", ExecOptions())).stdout == "before\n"
            daemons.kill()
            back = _back_later(daemons)
            after = await runner.run("echo after", ExecOptions())
            back.join()
            assert (after.stdout, after.error) == ("after\n", None), after
        finally:
            await runner.aclose()
