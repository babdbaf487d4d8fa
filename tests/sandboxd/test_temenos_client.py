"""A temenos client drives sandboxd exactly as temenos's Go client drives temenos.

That client gives up on any request after 120 s (its http.Client timeout), so a command of
two minutes or more can only reach it as a background job: `POST /run` answers with the
job's id after 30 s, and the jobs API gives its status and, once it ended, its output.

WHY scaled down: the proof is the ratios (the answer comes long before the client gives up,
the command runs on well past that), not the minutes; this client gives up after a sixth of
temenos's limit and its daemon answers after a sixth of temenos's threshold, so the test
takes half a minute rather than three.
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

SCALE = 6
"""Every time of the temenos original (its client's limit, its threshold, the command's
ticks, each bound checked) divided by this: see the module's docstring."""
GO_CLIENT_TIMEOUT_S = 120 / SCALE
"""temenos's client/client.go: defaultHTTPTimeout (120 s), for every request."""
BACKGROUND_AFTER_S = 30 / SCALE
"""temenos's threshold (30 s): a command still running then goes on as a job."""
RUN_TIMEOUT_S = 240 // SCALE
TICKS = 18
TICK_S = 10 / SCALE
LONGER_THAN_THE_CLIENT = (
    f'for i in $(seq 1 {TICKS}); do echo "tick $i"; sleep {TICK_S:.3f}; done; echo done >&2; exit 3'
)
"""Three minutes for temenos's client, scaled alike: half as long again as it waits."""


def _go_client(socket: Path) -> httpx.Client:
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(socket)),
        base_url="http://temenos",
        timeout=GO_CLIENT_TIMEOUT_S,
    )


def _timed(client: httpx.Client, method: str, url: str, **options: Any) -> httpx.Response:
    """One request, which (like the Go client's) fails once it has taken its client's limit."""
    started = time.monotonic()
    response = client.request(method, url, **options)
    assert time.monotonic() - started < GO_CLIENT_TIMEOUT_S
    return response


def _rfc3339(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_command_longer_than_the_client_waits_reaches_it_through_the_jobs_api(
    docker_client: Any, tmp_path: Path
) -> None:
    config = f"temenos_background_after_s = {BACKGROUND_AFTER_S}\n"
    with running_daemon(docker_client, config) as daemon, _go_client(daemon.socket) as client:
        # The JSON encoding/json makes of client.RunRequest: fields in struct order, empty
        # ones (env, network, auth_token) omitted.
        body = json.dumps(
            {
                "command": LONGER_THAN_THE_CLIENT,
                "allowed_paths": [{"path": str(tmp_path), "read_only": False}],
                "timeout": RUN_TIMEOUT_S,
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
        assert BACKGROUND_AFTER_S - 1 / SCALE <= waited < 2 * BACKGROUND_AFTER_S

        listed = _timed(client, "GET", "/jobs?caller_id=lenos-session-abc123&status=running").json()
        assert [(job["id"], job["status"], job["command"]) for job in listed] == [
            (job_id, "running", LONGER_THAN_THE_CLIENT)
        ]
        assert listed[0]["caller_id"] == "lenos-session-abc123"
        assert "stdout" not in listed[0] and "completed_at" not in listed[0]

        deadline = time.monotonic() + 300 / SCALE
        while True:
            job = _timed(client, "GET", f"/jobs/{job_id}")
            assert job.status_code == 200, job.text
            state = job.json()
            if state["status"] != "running":
                break
            assert time.monotonic() < deadline, state
            time.sleep(5 / SCALE)

        assert state["status"] == "completed"
        assert state["exit_code"] == 3
        assert state["stdout"] == "".join(f"tick {i}\n" for i in range(1, TICKS + 1))
        assert state["stderr"] == "done\n"
        ran = _rfc3339(state["completed_at"]) - _rfc3339(state["started_at"])
        longest = dt.timedelta(seconds=RUN_TIMEOUT_S)
        assert dt.timedelta(seconds=TICKS * TICK_S - 5 / SCALE) <= ran < longest
        completed = _timed(client, "GET", "/jobs?status=completed").json()
        assert [job["id"] for job in completed] == [job_id]
