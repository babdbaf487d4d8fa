"""The daemon's memory has an overall bound: output memory in flight is admitted, not assumed.

The attack: control characters expand six times in JSON (\\u0001), so one reply at
max_output_bytes = 8 MiB was about 100 MB; eight such requests at once took the daemon to
2.9 GiB and it kept 1.2 GiB afterwards. Here the same eight run against a daemon whose
max_output_memory is 512 MiB: its resident memory must stay within that budget (plus a
margin for everything else) and go back down afterwards; a request that cannot fit gets a
503 naming the setting.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.sampling import PeakOf, rss_bytes
from tests.support.sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

MIB = 1024**2
BIG_OUTPUT = 8 * MIB
"""The largest max_output_bytes a request may ask for."""
CONTROL_FLOOD = "head -c 20000000 /dev/zero | tr '\\0' '\\1'"
"""20 MB of \\x01: each kept byte is six bytes of JSON."""
BUDGET = 512 * MIB
MARGIN = 160 * MIB
"""Memory that is not reply output: the interpreter's own, the thread stacks, fragmentation."""
SETTLED_GROWTH = 96 * MIB
"""How far above its baseline the daemon may stay once the flood is over."""


def _warm(http: httpx.Client, session: str) -> None:
    # The session's container takes a large max_output_bytes before any large reply comes.
    warm = http.post(
        "/v1/run", json={"command": "true", "session": session, "max_output_bytes": BIG_OUTPUT}
    )
    assert warm.status_code == 200, warm.text


@pytest.mark.timeout(300)
def test_eight_control_character_floods_stay_within_the_budget(docker_client: Any) -> None:
    config = f'max_output_memory = "{BUDGET // MIB}m"\n'
    sessions = [f"flood-{index}" for index in range(8)]
    with running_daemon(docker_client, config) as daemon:

        def warm(session: str) -> None:
            with daemon.client() as own:
                _warm(own, session)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(warm, sessions))
        baseline = rss_bytes(daemon.proc.pid)

        def flood(session: str) -> httpx.Response:
            # One session each: eight containers whose replies arrive together.
            with daemon.client(timeout=240) as own:
                return own.post(
                    "/v1/run",
                    json={
                        "command": CONTROL_FLOOD,
                        "session": session,
                        "max_output_bytes": BIG_OUTPUT,
                        "timeout_s": 120,
                    },
                )

        with PeakOf(lambda: rss_bytes(daemon.proc.pid)) as rss, ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(flood, sessions))
        for answer in answers:
            assert answer.status_code == 200, answer.text[:2000]
            body = answer.json()
            assert body["exit_code"] == 0, body["error"]
            kept = body["stdout"].count("\x01")
            assert kept + body["stdout_dropped_bytes"] == 20_000_000
        after = _settledrss_bytes(daemon.proc.pid, baseline)
    growth = rss.peak - baseline
    assert growth <= BUDGET + MARGIN, (
        f"the daemon grew by {growth / MIB:.0f} MiB (from {baseline / MIB:.0f} to "
        f"{rss.peak / MIB:.0f} MiB) with a budget of {BUDGET / MIB:.0f} MiB"
    )
    assert after - baseline <= SETTLED_GROWTH, (
        f"the daemon kept {(after - baseline) / MIB:.0f} MiB above its baseline of "
        f"{baseline / MIB:.0f} MiB (peak {rss.peak / MIB:.0f} MiB)"
    )


def _settledrss_bytes(pid: int, baseline: int) -> int:
    """RSS once the daemon has had a few seconds to give memory back."""
    deadline = time.monotonic() + 10
    rss = rss_bytes(pid)
    while rss - baseline > SETTLED_GROWTH and time.monotonic() < deadline:
        time.sleep(0.2)
        rss = rss_bytes(pid)
    return rss


def _run_big(daemon: Daemon, command: str, session: str) -> httpx.Response:
    with daemon.client(timeout=120) as http:
        return http.post(
            "/v1/run",
            json={"command": command, "session": session, "max_output_bytes": BIG_OUTPUT},
        )


@pytest.mark.timeout(180)
def test_a_request_that_does_not_fit_the_budget_gets_a_503_naming_it(docker_client: Any) -> None:
    config = 'max_output_memory = "64m"\n'
    with running_daemon(docker_client, config) as daemon, daemon.client() as http:
        refused = _run_big(daemon, "echo never", "small-budget")
        small = http.post("/v1/run", json={"command": "echo fits", "session": "small-budget"})
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "output_memory_exhausted"
    assert "max_output_memory" in error["message"] and "max_output_bytes" in error["message"]
    assert small.status_code == 200 and small.json()["stdout"] == "fits\n", small.text


@pytest.mark.timeout(180)
def test_a_request_waits_for_budget_and_gets_a_503_when_none_frees_in_time(
    docker_client: Any,
) -> None:
    from sandboxd.server.admission import reply_memory_bound

    budget = reply_memory_bound(BIG_OUTPUT)  # room for one large request at a time
    config = f"max_output_memory = {budget}\nmax_output_memory_wait_s = 2\n"
    with running_daemon(docker_client, config) as daemon:
        with daemon.client() as http:
            _warm(http, "holder")
        with ThreadPoolExecutor(1) as pool:
            holding = pool.submit(_run_big, daemon, "sleep 6; echo held", "holder")
            time.sleep(2)  # the holder has its reservation by now
            started = time.monotonic()
            waited = _run_big(daemon, "echo second", "second")
            took = time.monotonic() - started
            held = holding.result()
        after = _run_big(daemon, "echo third", "second")
    assert waited.status_code == 503, waited.text
    assert waited.json()["error"]["code"] == "output_memory_busy"
    assert "max_output_memory" in waited.json()["error"]["message"]
    assert 1.5 < took < 30, took
    assert held.status_code == 200 and held.json()["stdout"] == "held\n", held.text
    # The holder's reservation was given back once its reply was sent.
    assert after.status_code == 200 and after.json()["stdout"] == "third\n", after.text
