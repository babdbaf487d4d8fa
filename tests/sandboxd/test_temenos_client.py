"""A temenos client drives sandboxd exactly as temenos's Go client drives temenos.

That client gives up on any request after 120 s (its http.Client timeout), so a command of
two minutes or more can only reach it as a background job: `POST /run` answers with the
job's id after 30 s, and the jobs API gives its status and, once it ended, its output.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.sandboxd_harness import running_daemon, temenos_background_answer

pytestmark = pytest.mark.docker

GO_CLIENT_TIMEOUT_S = 120.0
"""temenos's client/client.go: defaultHTTPTimeout, for every request."""
TICKS = 18
THREE_MINUTES = (
    f'for i in $(seq 1 {TICKS}); do echo "tick $i"; sleep 10; done; echo done >&2; exit 3'
)


def _go_client(socket: Path) -> httpx.Client:
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(socket)),
        base_url="http://temenos",
        timeout=GO_CLIENT_TIMEOUT_S,
    )


def _timed(client: httpx.Client, method: str, url: str, **options: Any) -> httpx.Response:
    """One request, which (like the Go client's) fails once it has taken 120 s."""
    started = time.monotonic()
    response = client.request(method, url, **options)
    assert time.monotonic() - started < GO_CLIENT_TIMEOUT_S
    return response


def _rfc3339(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_three_minute_command_reaches_a_temenos_client_through_the_jobs_api(
    docker_client: Any, tmp_path: Path
) -> None:
    with running_daemon(docker_client) as daemon, _go_client(daemon.socket) as client:
        # The JSON encoding/json makes of client.RunRequest: fields in struct order, empty
        # ones (env, network, auth_token) omitted.
        body = json.dumps(
            {
                "command": THREE_MINUTES,
                "allowed_paths": [{"path": str(tmp_path), "read_only": False}],
                "timeout": 240,
                "caller_id": "lenos-session-abc123",
            }
        )
        started = time.monotonic()
        run = _timed(
            client, "POST", "/run", content=body, headers={"Content-Type": "application/json"}
        )
        waited = time.monotonic() - started
        assert run.status_code == 200, run.text
        answer = run.json()
        job_id = answer["job_id"]
        assert answer == temenos_background_answer(job_id)
        assert 29.0 <= waited < 60.0

        listed = _timed(client, "GET", "/jobs?caller_id=lenos-session-abc123&status=running").json()
        assert [(job["id"], job["status"], job["command"]) for job in listed] == [
            (job_id, "running", THREE_MINUTES)
        ]
        assert listed[0]["caller_id"] == "lenos-session-abc123"
        assert "stdout" not in listed[0] and "completed_at" not in listed[0]

        deadline = time.monotonic() + 300
        while True:
            job = _timed(client, "GET", f"/jobs/{job_id}")
            assert job.status_code == 200, job.text
            state = job.json()
            if state["status"] != "running":
                break
            assert time.monotonic() < deadline, state
            time.sleep(5)

        assert state["status"] == "completed"
        assert state["exit_code"] == 3
        assert state["stdout"] == "".join(f"tick {i}\n" for i in range(1, TICKS + 1))
        assert state["stderr"] == "done\n"
        ran = _rfc3339(state["completed_at"]) - _rfc3339(state["started_at"])
        assert dt.timedelta(seconds=175) <= ran < dt.timedelta(seconds=240)
        completed = _timed(client, "GET", "/jobs?status=completed").json()
        assert [job["id"] for job in completed] == [job_id]
