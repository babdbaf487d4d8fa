"""temenos callers at volume: every distinct caller_id gets a container of its own, so without
reclaiming them a client that follows temenos's API (a fresh caller id per run, as
`logos exec --sandbox temenos` uses) was refused with 429 after a handful of runs.

A new sandbox over a cap first removes the least recently used idle temenos sandbox (its
caller's for the per-caller cap, anyone's for the total); while all of them are busy it
waits for one to go idle. Live containers stay within the caps, the daemon's memory stays
flat, and a named session of the native API is never removed to make room.
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


def _run(http: httpx.Client, caller: str, command: str = "echo ok") -> httpx.Response:
    return http.post("/run", json={"command": command, "caller_id": caller, "timeout": 60})


def _most_containers(docker_client: Any, daemon: Daemon) -> PeakOf:
    """The most live containers of the daemon seen while the `with` block runs."""
    return PeakOf(lambda: len(daemon.containers(docker_client)), interval_s=0.2)


@pytest.mark.timeout(600)
def test_sixty_sequential_callers_under_a_cap_of_four_all_run(docker_client: Any) -> None:
    config = "max_sessions = 4\nmax_sessions_per_caller = 4\n"
    with running_daemon(docker_client, config) as daemon, daemon.client() as http:
        assert _run(http, "warm-up").status_code == 200
        before = rss_bytes(daemon.proc.pid)
        with _most_containers(docker_client, daemon) as seen:
            for index in range(60):
                answer = _run(http, f"logos-{index:04x}", f"echo {index}")
                assert answer.status_code == 200, (index, answer.text)
                assert answer.json() == {"stdout": f"{index}\n", "stderr": "", "exit_code": 0}
        after = rss_bytes(daemon.proc.pid)
        live = len(daemon.containers(docker_client))
        health = http.get("/v1/health").json()
    print(
        f"60 sequential callers, cap 4: at most {seen.peak} live containers, {live} at the "
        f"end; daemon RSS {before / MIB:.1f} -> {after / MIB:.1f} MiB"
    )
    assert seen.peak <= 4 and live <= 4 and health["containers"] <= 4
    assert after - before < 24 * MIB


@pytest.mark.timeout(600)
def test_fifty_concurrent_callers_under_a_cap_of_eight_all_run(docker_client: Any) -> None:
    config = "max_sessions = 8\nmax_sessions_per_caller = 8\n"
    with running_daemon(docker_client, config) as daemon:

        def one(index: int) -> httpx.Response:
            with daemon.client(timeout=300) as http:
                return _run(http, f"concurrent-{index}", f"sleep 0.5; echo {index}")

        with _most_containers(docker_client, daemon) as seen, ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(one, range(50)))
        rss = rss_bytes(daemon.proc.pid)
    statuses = sorted(answer.status_code for answer in answers)
    print(
        f"50 concurrent callers, cap 8: statuses {set(statuses)}, at most {seen.peak} live "
        f"containers; daemon RSS {rss / MIB:.1f} MiB"
    )
    for index, answer in enumerate(answers):
        assert answer.status_code == 200, (index, answer.text)
        assert answer.json()["stdout"] == f"{index}\n"
    assert seen.peak <= 8


@pytest.mark.timeout(300)
def test_named_sessions_are_never_removed_and_busy_callers_are_refused_in_time(
    docker_client: Any,
) -> None:
    config = "max_sessions = 2\nmax_sessions_per_caller = 2\nsession_wait_s = 3\n"
    with running_daemon(docker_client, config) as daemon, daemon.client() as http:
        kept = http.post("/v1/run", json={"command": "echo kept > /tmp/mark", "session": "keep"})
        assert kept.status_code == 200, kept.text
        assert _run(http, "first").status_code == 200
        # The temenos caller's idle sandbox makes room, never the named session's.
        assert _run(http, "second").status_code == 200
        mark = http.post("/v1/run", json={"command": "cat /tmp/mark", "session": "keep"})
        assert mark.json()["stdout"] == "kept\n"
        # A new named session evicts the idle temenos sandbox too.
        other = http.post("/v1/run", json={"command": "true", "session": "other"})
        assert other.status_code == 200, other.text
        # Now nothing is reclaimable: a new caller is refused at once, naming the cap.
        started = time.monotonic()
        refused = _run(http, "third")
        assert refused.status_code == 429 and "max_sessions" in refused.json()["error"]
        assert time.monotonic() - started < 3
        # A busy temenos caller will free its place: a new one waits session_wait_s for it.
        assert http.delete("/v1/sessions/other").status_code == 200
        with ThreadPoolExecutor(1) as pool, daemon.client() as busy_http:
            busy = pool.submit(_run, busy_http, "busy", "sleep 8")
            time.sleep(2)
            started = time.monotonic()
            waited = _run(http, "fourth")
            waited_s = time.monotonic() - started
            assert busy.result().status_code == 200
        assert waited.status_code == 429 and 3 <= waited_s < 8, (waited.text, waited_s)
