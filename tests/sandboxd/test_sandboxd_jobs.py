"""sandboxd's jobs against a real daemon and the real engine: a command still running at its
background threshold goes on in its container, and the jobs routes report it to its caller."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import anyio
import httpx
import pytest

from logos import Callbacks, Config, ExecOptions, run
from logos.result import Result
from logos.runners.job_runner import JobRunner
from sandboxd.client.runner import SandboxRunner
from tests.support.sandboxd_harness import (
    Daemon,
    running_daemon,
    running_daemon_as,
    temenos_background_answer,
)
from tests.support.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.docker


def _run(http: httpx.Client, command: str, **fields: Any) -> dict[str, Any]:
    answer = http.post("/v1/run", json={"command": command, **fields})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _job(http: httpx.Client, job_id: str, wait_s: float = 0) -> dict[str, Any]:
    answer = http.get(f"/v1/jobs/{job_id}", params={"wait_s": wait_s})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_slow_command_goes_on_as_a_job_and_its_end_is_reported(daemon: Daemon) -> None:
    with daemon.client() as http:
        _run(http, "true", session="jobs-a")  # its container starts first
        started = time.monotonic()
        ran = _run(
            http,
            "echo before; sleep 3; echo after; echo oops >&2; exit 4",
            session="jobs-a",
            background_after_s=1,
        )
        assert time.monotonic() - started < 2.5
        job_id = ran["job"]["id"]
        assert (ran["stdout"], ran["exit_code"]) == ("before\n", None)
        assert ran["job"]["stdout_file"] and ran["job"]["stderr_file"]

        [listed] = http.get("/v1/sessions/jobs-a/jobs").json()["jobs"]
        assert (listed["id"], listed["status"], listed["ended_at"]) == (job_id, "running", None)
        assert http.get("/v1/sessions/other/jobs").json() == {"jobs": []}

        ended = _job(http, job_id, wait_s=30)
        assert ended["status"] == "completed" and ended["ended_at"] is not None
        result = ended["result"]
        assert (result["exit_code"], result["stdout"], result["stderr"]) == (4, "after\n", "oops\n")
        assert result["duration_s"] >= 3.0

        # Its copies hold all of it, for the session's next command.
        whole = _run(http, f"cat {ran['job']['stdout_file']}", session="jobs-a")
        assert whole["stdout"] == "before\nafter\n"

        assert http.delete(f"/v1/jobs/{job_id}").json()["status"] == "completed"
        gone = http.get(f"/v1/jobs/{job_id}")
        assert gone.status_code == 404 and "GET /v1/sessions/{id}/jobs" in gone.text


def test_a_quick_command_never_becomes_a_job(daemon: Daemon) -> None:
    with daemon.client() as http:
        ran = _run(http, "echo quick", background_after_s=5)
    assert (ran["stdout"], ran["exit_code"], ran["job"]) == ("quick\n", 0, None)


def test_a_job_is_stopped_on_request_and_forgotten(daemon: Daemon) -> None:
    with daemon.client() as http:
        ran = _run(http, "sleep 600", session="jobs-b", background_after_s=0.5)
        job_id = ran["job"]["id"]
        started = time.monotonic()
        stopped = http.delete(f"/v1/jobs/{job_id}").json()
        assert time.monotonic() - started < 10
        assert stopped["status"] == "killed" and stopped["result"]["signal"] == 15
        assert http.get(f"/v1/jobs/{job_id}").status_code == 404
        assert http.get("/v1/sessions/jobs-b/jobs").json() == {"jobs": []}


def test_a_job_past_its_timeout_is_killed_and_says_so(daemon: Daemon) -> None:
    with daemon.client() as http:
        ran = _run(http, "sleep 600", timeout_s=3, background_after_s=1)
        ended = _job(http, ran["job"]["id"], wait_s=30)
    assert ended["status"] == "killed"
    assert ended["result"]["timed_out"] is True and ended["result"]["exit_code"] is None
    assert 3.0 <= ended["result"]["duration_s"] < 15


def test_a_jobs_output_larger_than_the_cap_stays_bounded(daemon: Daemon) -> None:
    with daemon.client() as http:
        ran = _run(
            http,
            "echo start; sleep 1.5; seq 1 300000; sleep 0.5",
            session="jobs-c",
            background_after_s=1,
            max_output_bytes=1000,
        )
        ended = _job(http, ran["job"]["id"], wait_s=30)
        result = ended["result"]
        assert len(result["stdout"].encode()) < 2000
        assert result["stdout"].startswith("1\n2\n") and result["stdout"].endswith("\n300000\n")
        assert result["stdout_dropped_bytes"] > 1_000_000
        counted = _run(http, f"wc -l < {result['stdout_file']}", session="jobs-c")
    assert counted["stdout"] == "300001\n"


def test_closing_the_session_ends_its_jobs(daemon: Daemon) -> None:
    with daemon.client() as http:
        # A session may be called "jobs", like the route of a session's jobs.
        ran = _run(http, "sleep 600", session="jobs", background_after_s=0.5)
        assert [job["id"] for job in http.get("/v1/sessions/jobs/jobs").json()["jobs"]] == [
            ran["job"]["id"]
        ]
        assert http.delete("/v1/sessions/jobs").status_code == 200
        ended = _job(http, ran["job"]["id"], wait_s=30)
    assert ended["status"] == "killed" and ended["result"]["error"]


def test_a_session_with_a_running_job_is_not_reaped_as_idle(docker_client: Any) -> None:
    with running_daemon(docker_client, "idle_ttl_s = 1\n") as serving, serving.client() as http:
        ran = _run(http, "sleep 6; echo done", background_after_s=0.5)
        ended = _job(http, ran["job"]["id"], wait_s=30)
    assert ended["status"] == "completed"
    assert (ended["result"]["exit_code"], ended["result"]["stdout"]) == (0, "done\n")


def test_jobs_over_the_callers_cap_are_refused_in_words(docker_client: Any) -> None:
    config = "max_jobs_per_caller = 1\n"
    with running_daemon(docker_client, config) as serving, serving.client() as http:
        first = _run(http, "sleep 600", background_after_s=0.5)
        refused = http.post(
            "/v1/run", json={"command": "sleep 600; echo never", "background_after_s": 0.5}
        )
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "too_many_jobs" and "max_jobs_per_caller" in error["message"]
        assert [job["id"] for job in http.get("/v1/sessions/default/jobs").json()["jobs"]] == [
            first["job"]["id"]
        ]
        quick = _run(http, "echo still serving", background_after_s=5)
        assert quick["stdout"] == "still serving\n"


@pytest.mark.parametrize("query", ["wait_s=-1", "wait_s=soon", "wait_s=99999"])
def test_a_bad_wait_is_refused_in_words(daemon: Daemon, query: str) -> None:
    with daemon.client() as http:
        ran = _run(http, "sleep 600", session="jobs-e", background_after_s=0.5)
        answer = http.get(f"/v1/jobs/{ran['job']['id']}?{query}")
        http.delete("/v1/sessions/jobs-e")
    assert answer.status_code == 400 and "number of seconds" in answer.json()["error"]["message"]


def test_the_temenos_routes_answer_in_temenos_shapes(docker_client: Any) -> None:
    config = "temenos_background_after_s = 1\n"
    with running_daemon(docker_client, config) as serving, serving.client() as http:
        # Unknown fields are ignored, as temenos's decoder ignores them.
        quick = http.post("/run", json={"command": "echo hi", "auth_token": "", "future": 1})
        assert quick.json() == {"stdout": "hi\n", "stderr": "", "exit_code": 0}

        slow = http.post("/run", json={"command": "sleep 600", "caller_id": "lenos-1"}).json()
        job_id = slow["job_id"]
        assert slow == temenos_background_answer(job_id)
        [listed] = http.get("/jobs", params={"status": "running", "caller_id": "lenos-1"}).json()
        assert listed["status"] == "running" and listed["caller_id"] == "lenos-1"
        assert http.get("/jobs", params={"caller_id": "someone-else"}).json() == []
        assert http.get("/jobs", params={"status": "completed"}).json() == []

        killed = http.delete(f"/jobs/{job_id}")
        assert killed.status_code == 200 and killed.json()["status"] == "killed"
        assert "completed_at" in killed.json()
        again = http.delete(f"/jobs/{job_id}")
        assert again.status_code == 409 and again.json() == {"error": "job already completed"}
        assert [job["id"] for job in http.get("/jobs?status=killed").json()] == [job_id]

        bad = http.get("/jobs", params={"status": "sleeping"})
        assert bad.status_code == 400 and bad.json() == {"error": 'invalid job status "sleeping"'}
        unknown = http.get("/jobs/999999")
        assert unknown.status_code == 404 and list(unknown.json()) == ["error"]
        invalid = http.post("/run", json={"command": "echo \u0000"})
        assert invalid.status_code == 400 and "command" in invalid.json()["error"]
        assert set(http.get("/health").json()) == {"ok", "platform", "version"}


@pytest.mark.timeout(240)
def test_another_callers_jobs_are_invisible_to_it(docker_client: Any) -> None:
    """A second uid tries to list, read and stop root's job through every route."""
    with running_daemon_as(docker_client, 1000) as (serving, user), serving.client() as http:
        ran = _run(http, "echo secret-output; sleep 600", background_after_s=0.5)
        job_id = ran["job"]["id"]
        probe = f"""
import httpx, json
http = httpx.Client(transport=httpx.HTTPTransport(uds={str(serving.socket)!r}),
                    base_url="http://sandboxd", timeout=60)
seen = {{
    "v1_get": http.get("/v1/jobs/{job_id}").status_code,
    "v1_delete": http.delete("/v1/jobs/{job_id}").status_code,
    "v1_list": http.get("/v1/sessions/default/jobs").json(),
    "get": http.get("/jobs/{job_id}").status_code,
    "delete": http.delete("/jobs/{job_id}").status_code,
    "list": http.get("/jobs").json(),
}}
print(json.dumps(seen))
"""
        seen = subprocess.run(
            [user.python, "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
            user=user.uid,
            group=user.uid,
            extra_groups=[],
            env={"HOME": str(user.home), **user.python_env},
        )
        assert seen.returncode == 0, seen.stderr
        assert json.loads(seen.stdout) == {
            "v1_get": 404,
            "v1_delete": 404,
            "v1_list": {"jobs": []},
            "get": 404,
            "delete": 404,
            "list": [],
        }
        still = _job(http, job_id)
        assert still["status"] == "running" and "secret-output" not in still["result"]["stdout"]


@pytest.mark.anyio
async def test_a_sandbox_runner_keeps_jobs(daemon: Daemon) -> None:
    options = ExecOptions(background_after_s=0.5, timeout_s=60)
    async with SandboxRunner(socket=daemon.socket) as runner:
        assert isinstance(runner, JobRunner)
        built = await runner.run("sleep 2; echo built", options)
        server = await runner.run("echo serving; sleep 600", options)
        assert built.job is not None and server.job is not None and server.stdout == "serving\n"
        listed = await runner.list_jobs()
        assert sorted(job.id for job in listed) == sorted([built.job.id, server.job.id])
        assert await runner.wait_job(server.job.id, 0.5) is None
        end = await runner.wait_job(built.job.id, 30)
        assert end is not None and end.result.ok and end.result.stdout == "built\n"
        stopped = await runner.kill_job(server.job.id)
        assert stopped.result.signal == 15
        assert await runner.list_jobs() == [] and await runner.ended_jobs() == []
        with pytest.raises(LookupError, match="no job"):
            await runner.wait_job(built.job.id, 1)

        left = await runner.run("sleep 1; exit 2", options)
        assert left.job is not None
        await anyio.sleep(2)
        [ended] = await runner.ended_jobs()
        assert (ended.id, ended.result.exit_code) == (left.job.id, 2)


@pytest.mark.anyio
async def test_the_loop_gets_a_sandbox_jobs_end_in_a_later_envelope(daemon: Daemon) -> None:
    provider = ScriptedProvider(
        [
            Reply("Both.\n<cmd>echo fast</cmd>\n<cmd>sleep 3; echo slow done</cmd>"),
            Reply("Waiting.\n<cmd>jobs</cmd>"),
            Reply("<cmd>wait %{job}</cmd>"),
            Reply("Both ran."),
        ]
    )
    runner = SandboxRunner(socket=daemon.socket)
    config = Config(
        provider=provider,
        system_prompt="test system prompt",
        runner=runner,
        exec_options=ExecOptions(timeout_s=60, background_after_s=1),
    )

    # The job's id is the daemon's: the wait names it once the first result gave it.
    def on_command_result(index: int, result: Result) -> None:
        if result.job is not None:
            waiting = [i for i, r in enumerate(provider.replies) if "%{job}" in r.text]
            for i in waiting:
                provider.replies[i] = Reply(f"<cmd>wait %{result.job.id}</cmd>")

    try:
        result = await run(config, [], "go", Callbacks(on_command_result=on_command_result))
    finally:
        await runner.aclose()
    assert result.stop_reason == "final", result
    fast, slow = result.steps[1].results
    assert fast.stdout == "fast\n" and slow.job is not None
    assert "<job " not in result.steps[1].content  # the fast one did not wait for it
    waited = provider.requests[3].messages[-1].content
    assert f'<job id="{slow.job.id}">' in waited and "slow done" in waited
    [end] = result.jobs
    assert end.result.ok and end.result.stdout == "slow done\n"
