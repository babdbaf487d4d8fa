"""TemenosRunner against real daemons that speak temenos's API: sandboxd's temenos routes
(a real daemon on a real socket, real Docker), and, for TCP addresses, tokens and a short
background threshold, the small real server of tests/support/temenos_server.py."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from logos.ceiling import ceiling_of
from logos.options import AllowedPath, ExecOptions
from logos.result import Result
from logos.runners.auth_token import AuthToken
from logos.runners.job_runner import JobRunner
from logos.temenos.runner import TemenosRunner
from tests.support.sandboxd_harness import Daemon, running_daemon
from tests.support.temenos_server import temenos_server

pytestmark = pytest.mark.anyio


def _rw(path: Path) -> ExecOptions:
    return ExecOptions(allowed_paths=(AllowedPath(str(path), read_only=False),), timeout_s=60)


async def _run_once(daemon: Daemon, command: str, options: ExecOptions) -> Result:
    """`command` through a TemenosRunner of its own on `daemon`'s socket."""
    async with TemenosRunner(str(daemon.socket)) as runner:
        return await runner.run(command, options)


# --- sandboxd's temenos routes --------------------------------------------------------------


@pytest.mark.docker
async def test_a_command_runs_in_the_allowed_path(daemon: Daemon, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("seen\n")
    command = "cat in.txt; echo made > out.txt; echo oops >&2; exit 3"
    result = await _run_once(daemon, command, _rw(tmp_path))
    assert (result.stdout, result.stderr, result.exit_code) == ("seen\n", "oops\n", 3)
    assert result.error is None and not result.timed_out
    assert (tmp_path / "out.txt").read_text() == "made\n"


@pytest.mark.docker
async def test_a_refused_path_is_an_error_naming_the_rule(daemon: Daemon) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath("/etc"),))
    result = await _run_once(daemon, "cat /etc/hostname", options)
    assert result.exit_code is None and result.error is not None
    assert "refused (HTTP 403)" in result.error and "/etc" in result.error


@pytest.mark.docker
async def test_an_allowlist_of_hosts_is_refused_not_ignored(daemon: Daemon) -> None:
    result = await _run_once(daemon, "true", ExecOptions(allowed_hosts=("pypi.org",)))
    assert result.exit_code is None and result.error is not None
    assert "temenos has no allowlist of hosts" in result.error


@pytest.mark.docker
async def test_withheld_env_keys_are_named_in_words(daemon: Daemon, tmp_path: Path) -> None:
    options = ExecOptions(
        env={"GITHUB_TOKEN": "ghp_not_real", "GREETING": "hi"},
        allowed_paths=(AllowedPath(str(tmp_path)),),
    )
    result = await _run_once(daemon, 'echo "$GREETING/${GITHUB_TOKEN:-unset}/$PAGER"', options)
    assert result.stdout == "hi/unset/cat\n"
    assert result.stderr == (
        "temenos: the daemon withheld these env keys (its allow list does not let them "
        "through): GITHUB_TOKEN\n"
    )


@pytest.mark.docker
async def test_a_timeout_is_said_as_a_timeout(daemon: Daemon, tmp_path: Path) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath(str(tmp_path)),), timeout_s=1.5)
    async with TemenosRunner(str(daemon.socket)) as runner:
        started = time.monotonic()
        result = await runner.run("echo before; sleep 60", options)
    assert result.timed_out and result.exit_code is None and result.error is None
    assert result.stdout == "before\n"
    assert 1.5 <= time.monotonic() - started < 30  # whole seconds: 1.5 s is sent as 2


@pytest.mark.docker
async def test_a_command_killed_by_a_signal_is_not_an_exit_code(
    daemon: Daemon, tmp_path: Path
) -> None:
    result = await _run_once(daemon, "kill -9 $$", _rw(tmp_path))
    assert result.exit_code is None and not result.timed_out
    assert result.error is not None and "no exit status" in result.error


@pytest.mark.docker
async def test_a_cancelled_command_is_killed(daemon: Daemon, tmp_path: Path) -> None:
    async with TemenosRunner(str(daemon.socket)) as runner:
        with anyio.move_on_after(3):
            await runner.run("sleep 6; touch late", _rw(tmp_path))
        await anyio.sleep(6)
    assert not (tmp_path / "late").exists()


async def test_no_daemon_on_the_socket_is_a_clear_error(tmp_path: Path) -> None:
    async with TemenosRunner(str(tmp_path / "none.sock")) as runner:
        result = await runner.run("true", ExecOptions())
    assert result.error is not None and result.exit_code is None
    assert f"cannot reach a temenos daemon at {tmp_path / 'none.sock'}" in result.error
    assert "--sandbox-addr" in result.error


async def test_no_daemon_on_the_port_is_a_clear_error() -> None:
    with temenos_server() as server:
        address = server.address  # a port that was free, closed again below
    async with TemenosRunner(address) as runner:
        result = await runner.run("true", ExecOptions())
    assert result.error is not None and "cannot reach a temenos daemon at http://" in result.error


@pytest.mark.docker
async def test_a_daemon_that_dies_mid_command_is_a_clear_error(
    docker_client: Any, tmp_path: Path
) -> None:
    async def kill_daemon() -> None:
        await anyio.sleep(4)
        doomed.proc.send_signal(signal.SIGKILL)

    with running_daemon(docker_client) as doomed:
        async with TemenosRunner(str(doomed.socket)) as runner, anyio.create_task_group() as group:
            group.start_soon(kill_daemon)
            started = time.monotonic()
            result = await runner.run("sleep 50", _rw(tmp_path))
    assert time.monotonic() - started < 30
    assert result.error is not None and result.exit_code is None
    assert (
        "broke during POST /run" in result.error and "the daemon may have stopped" in result.error
    )


@pytest.mark.docker
async def test_a_daemon_that_dies_while_a_job_runs_is_a_clear_error(
    docker_client: Any, tmp_path: Path
) -> None:
    async def kill_daemon() -> None:
        await anyio.sleep(4)  # the command went on as a job at 1 s
        doomed.proc.send_signal(signal.SIGKILL)

    with running_daemon(docker_client, "temenos_background_after_s = 1\n") as doomed:
        # WHY a short wait: the runner waits RESTART_WAIT_S for a daemon that went away to come
        # back; this one never does, and the proof is the same with a shorter wait.
        dying = TemenosRunner(str(doomed.socket), restart_wait_s=3.0)
        async with dying as runner, anyio.create_task_group() as group:
            group.start_soon(kill_daemon)
            result = await runner.run("sleep 50", _rw(tmp_path))
    assert result.error is not None and result.exit_code is None and result.duration_s < 30
    # Killed between two polls the next one cannot connect; killed during one, it breaks:
    # either way the error says the job is lost, where the daemon was, and what to do.
    assert result.error.startswith("lost job ") and str(doomed.socket) in result.error
    assert ("cannot reach a temenos daemon" in result.error and "start it" in result.error) or (
        "broke during GET" in result.error and "restart it" in result.error
    )


# --- the jobs API and TCP, on the test server ---------------------------------------------


@pytest.mark.parametrize("form", ["{host}:{port}", "http://{host}:{port}", ":{port}"])
async def test_tcp_address_forms_reach_the_daemon(form: str, tmp_path: Path) -> None:
    with temenos_server() as server:
        address = form.format(host="127.0.0.1", port=server.port)
        async with TemenosRunner(address) as runner:
            result = await runner.run("echo over tcp", _rw(tmp_path))
    assert result.ok and result.stdout == "over tcp\n"


async def test_a_job_is_followed_to_its_end(tmp_path: Path) -> None:
    with temenos_server(background_after_s=0.5) as server:
        async with TemenosRunner(server.address) as runner:
            result = await runner.run("echo start; sleep 2; echo end; exit 4", _rw(tmp_path))
        methods = [(method, path) for method, path, _ in server.requests]
    assert (result.stdout, result.exit_code, result.error) == ("start\nend\n", 4, None)
    assert methods[0] == ("POST", "/run") and ("GET", "/jobs/000001") in methods
    assert ("DELETE", "/jobs/000001") not in methods


async def test_a_job_past_its_timeout_is_a_timeout(tmp_path: Path) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath(str(tmp_path)),), timeout_s=2)
    with temenos_server(background_after_s=0.5) as server:
        async with TemenosRunner(server.address) as runner:
            result = await runner.run("echo partial; sleep 60", options)
        job = server.jobs["000001"]
    assert result.timed_out and result.exit_code is None and result.error is None
    assert result.stdout == "partial\n" and job.status == "killed"


async def test_a_cancelled_job_is_deleted(tmp_path: Path) -> None:
    with temenos_server(background_after_s=0.5) as server:
        async with TemenosRunner(server.address) as runner:
            with anyio.move_on_after(2):
                await runner.run("sleep 60", _rw(tmp_path))
            job = server.jobs["000001"]
            assert job.status == "killed"
        assert ("DELETE", "/jobs/000001") in [(m, p) for m, p, _ in server.requests]


async def test_closing_the_runner_kills_its_jobs(tmp_path: Path) -> None:
    with temenos_server(background_after_s=0.5) as server:
        runner = TemenosRunner(server.address)
        async with anyio.create_task_group() as group:
            group.start_soon(runner.run, "sleep 60", _rw(tmp_path))
            while ("GET", "/jobs/000001") not in [(m, p) for m, p, _ in server.requests]:
                await anyio.sleep(0.1)  # the runner follows the job now
            await runner.aclose()
        assert server.jobs["000001"].status == "killed"


async def test_the_token_is_sent_and_follows_its_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    with temenos_server() as server:
        async with TemenosRunner(
            server.address, auth_token=AuthToken(path=str(token_file))
        ) as runner:
            await runner.run("true", ExecOptions())
            # Kubernetes rotates a projected token by swapping the file for a new one.
            replacement = tmp_path / "token.new"
            replacement.write_text("second-token\n")
            replacement.replace(token_file)
            await runner.run("true", ExecOptions())
            token_file.unlink()
            missing = await runner.run("true", ExecOptions())
        sent = [body["auth_token"] for body in server.run_bodies()]
    assert sent == ["first-token", "second-token"]
    assert missing.error is not None and str(token_file) in missing.error
    assert "token" not in repr(runner).lower()


async def test_a_workdir_temenos_cannot_honour_is_refused_before_sending(tmp_path: Path) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath(str(tmp_path)),), workdir="/elsewhere")
    with temenos_server() as server:
        async with TemenosRunner(server.address) as runner:
            refused = await runner.run("pwd", options)
            first = await runner.run(
                "pwd", ExecOptions(allowed_paths=options.allowed_paths, workdir=str(tmp_path))
            )
        sent = server.run_bodies()
    assert refused.error is not None and "list it first in allowed_paths" in refused.error
    assert first.stdout == f"{tmp_path}\n" and len(sent) == 1


async def test_a_path_outside_the_ceiling_is_refused_before_sending(tmp_path: Path) -> None:
    """temenos takes no ceiling: the runner holds each path to it itself, never drops it."""
    (tmp_path / "granted").mkdir()
    (tmp_path / "outside").mkdir()
    ceiling = ceiling_of([AllowedPath(str(tmp_path / "granted"), read_only=True)])
    link = tmp_path / "granted" / "to-outside"
    link.symlink_to(tmp_path / "outside")
    outside = ExecOptions(allowed_paths=(AllowedPath(str(link)),), path_ceiling=ceiling)
    writable = ExecOptions(
        allowed_paths=(AllowedPath(str(tmp_path / "granted"), read_only=False),),
        path_ceiling=ceiling,
    )
    inside = ExecOptions(
        allowed_paths=(AllowedPath(str(tmp_path / "granted")),), path_ceiling=ceiling
    )
    with temenos_server() as server:
        async with TemenosRunner(server.address) as runner:
            refused = [await runner.run("pwd", options) for options in (outside, writable)]
            ran = await runner.run("pwd", inside)
        sent = server.run_bodies()
    assert refused[0].error is not None
    assert f"refused {link} (resolves to {tmp_path / 'outside'}): it is outside" in refused[0].error
    assert refused[1].error is not None and "only read-only" in refused[1].error
    assert ran.error is None and len(sent) == 1


# --- sandboxd's temenos jobs (a threshold of 1 s) -------------------------------------------


@pytest.fixture(scope="module")
def jobs_daemon(docker_client: Any) -> Iterator[Daemon]:
    """sandboxd moving temenos commands to the background after 1 s instead of 30 s."""
    with running_daemon(docker_client, "temenos_background_after_s = 1\n") as serving:
        yield serving


def _daemon_jobs(daemon: Daemon, runner: TemenosRunner) -> list[dict[str, Any]]:
    """The runner's jobs as the daemon lists them (temenos's GET /jobs)."""
    with daemon.client() as http:
        listed: list[dict[str, Any]] = http.get(
            "/jobs", params={"caller_id": runner.caller_id}
        ).json()
    return listed


@pytest.mark.docker
async def test_a_long_command_goes_on_as_a_job_and_is_followed_to_its_end(
    jobs_daemon: Daemon, tmp_path: Path
) -> None:
    async with TemenosRunner(str(jobs_daemon.socket)) as runner:
        result = await runner.run("echo start; sleep 3; echo end >&2; exit 5", _rw(tmp_path))
        jobs = _daemon_jobs(jobs_daemon, runner)
    assert (result.stdout, result.exit_code, result.error, result.job) == ("start\n", 5, None, None)
    assert result.stderr == "end\n" and result.duration_s >= 3
    assert [(job["status"], job["exit_code"]) for job in jobs] == [("completed", 5)]


@pytest.mark.docker
async def test_a_cancelled_command_s_job_is_killed_on_the_daemon(
    jobs_daemon: Daemon, tmp_path: Path
) -> None:
    async with TemenosRunner(str(jobs_daemon.socket)) as runner:
        with anyio.move_on_after(3):
            await runner.run("sleep 60", _rw(tmp_path))
        jobs = _daemon_jobs(jobs_daemon, runner)
    assert [job["status"] for job in jobs] == ["killed"]


@pytest.mark.docker
async def test_a_job_past_its_timeout_is_a_timeout_on_sandboxd(
    jobs_daemon: Daemon, tmp_path: Path
) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath(str(tmp_path)),), timeout_s=3)
    async with TemenosRunner(str(jobs_daemon.socket)) as runner:
        result = await runner.run("echo partial; sleep 60", options)
    assert result.timed_out and result.exit_code is None and result.error is None
    assert result.stdout == "partial\n" and 3 <= result.duration_s < 30


@pytest.mark.docker
async def test_jobs_for_the_loop_wait_kill_and_end_with_the_runner(
    jobs_daemon: Daemon, tmp_path: Path
) -> None:
    options = ExecOptions(
        allowed_paths=(AllowedPath(str(tmp_path), read_only=False),),
        timeout_s=60,
        background_after_s=1,
    )
    runner = TemenosRunner(str(jobs_daemon.socket))
    assert isinstance(runner, JobRunner)
    async with runner:
        waited = await runner.run("echo one; sleep 2; echo two; exit 3", options)
        killed = await runner.run("echo x; sleep 60", options)
        left = await runner.run("sleep 60; touch never", options)
        assert [r.job.id if r.job else None for r in (waited, killed, left)] == ["1", "2", "3"]
        # As temenos, sandboxd shows a running job no output: its end shows all of it.
        assert waited.stdout == "" and waited.exit_code is None
        assert {"2", "3"} <= {job.id for job in await runner.list_jobs()}

        end = await runner.wait_job("1", 30)
        assert end is not None and (end.result.stdout, end.result.exit_code) == ("one\ntwo\n", 3)
        stopped = await runner.kill_job("2")
        assert stopped.result.error is not None and "stopped on request" in stopped.result.error
        assert await runner.ended_jobs() == []
        with pytest.raises(LookupError, match="there is no job 1"):
            await runner.wait_job("1", 1)
        assert [job.id for job in await runner.list_jobs()] == ["3"]
        jobs = _daemon_jobs(jobs_daemon, runner)
    assert sorted(job["status"] for job in jobs) == ["completed", "killed", "running"]
    assert sorted(job["status"] for job in _daemon_jobs(jobs_daemon, runner)) == [
        "completed",
        "killed",
        "killed",
    ]  # closing the runner killed job 3


async def test_a_job_is_handed_out_at_the_later_of_both_thresholds(tmp_path: Path) -> None:
    options = ExecOptions(allowed_paths=(AllowedPath(str(tmp_path)),), background_after_s=2)
    with temenos_server(background_after_s=0.5) as server:
        async with TemenosRunner(server.address) as runner:
            quick = await runner.run("sleep 1; echo quick", options)
            slow = await runner.run("echo slow; sleep 60", options)
            assert (quick.job, quick.stdout, quick.exit_code) == (None, "quick\n", 0)
            assert slow.job is not None and slow.job.id == "1" and slow.stdout == "slow\n"
            assert 2 <= slow.duration_s < 20
        assert server.jobs["000002"].status == "killed"  # closing the runner killed it
