"""Attack: one caller starts containers until the host runs out of pids or memory.

Through a real daemon: the caps refuse the start over them (429 naming the setting), leave
other callers and running sessions alone, free a slot when a session closes, and hold under
concurrent starts (starts in progress count), also for sessions started without a command.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandboxd.server.config import ConfigError, config_from_mapping
from sandboxd.sessions.caps import HostFigures, SessionCaps
from tests.support.parts import require
from tests.support.sandboxd_harness import (
    Daemon,
    OtherUser,
    python_for_others,
    running_daemon,
)

OTHER_UID = 1000


def _start(daemon: Daemon, session: str) -> httpx.Response:
    with daemon.client() as client:
        return client.post("/v1/run", json={"command": "true", "session": session})


def _refusal(response: httpx.Response) -> str:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == "too_many_sessions"
    message: str = error["message"]
    return message


@pytest.fixture
def two_callers(docker_client: Any) -> Iterator[tuple[Daemon, Any]]:
    """A daemon capped at 3 containers, 2 per caller, that a second uid may reach too."""
    require(os.getuid() == 0, "a second caller (another uid) needs root")
    found = python_for_others()
    require(found is not None, "no Python interpreter that a non-root user may execute")
    assert found is not None
    other = OtherUser(OTHER_UID, Path("/"), *found)
    config = "max_sessions = 3\nmax_sessions_per_caller = 2\n"
    with running_daemon(docker_client, config) as daemon:
        # WHY widened: the test plays a deployment where a second user may use the daemon.
        daemon.root.chmod(0o711)
        daemon.socket.chmod(0o666)

        def run_as_other(session: str) -> subprocess.CompletedProcess[str]:
            socket = str(daemon.socket)
            return other.sandboxd("run", "--socket", socket, "--session", session, "--", "id -u")

        yield daemon, run_as_other


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_caps_per_caller_and_in_total_refuse_with_429_and_free_on_close(
    docker_client: Any, two_callers: tuple[Daemon, Any]
) -> None:
    daemon, run_as_other = two_callers
    assert _start(daemon, "mine-1").status_code == 200
    assert _start(daemon, "mine-2").status_code == 200

    per_caller = _refusal(_start(daemon, "mine-3"))
    assert "max_sessions_per_caller" in per_caller and "2 " in per_caller
    assert "DELETE /v1/sessions/" in per_caller

    # A session that has its container is never refused, even at the cap.
    again = _start(daemon, "mine-1")
    assert again.status_code == 200 and again.json()["exit_code"] == 0

    # Another caller still gets a container...
    other = run_as_other("theirs-1")
    assert (other.returncode, other.stdout) == (0, f"{OTHER_UID}\n"), other.stderr
    # ...until the total is reached, whoever holds it.
    over_total = run_as_other("theirs-2")
    assert over_total.returncode == 125, over_total.stdout
    assert "429 too_many_sessions" in over_total.stderr
    assert "max_sessions " in over_total.stderr and "3 " in over_total.stderr

    with daemon.client() as client:
        health = client.get("/v1/health").json()
        assert (health["containers"], health["max_sessions"]) == (3, 3)
        assert health["max_sessions_per_caller"] == 2
        assert client.delete("/v1/sessions/mine-1").status_code == 200
    freed = run_as_other("theirs-2")
    assert freed.returncode == 0, freed.stderr
    assert len(daemon.containers(docker_client)) == 3


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_concurrent_starts_never_exceed_the_cap(docker_client: Any) -> None:
    config = "max_sessions = 3\nmax_sessions_per_caller = 3\n"
    with running_daemon(docker_client, config) as daemon:
        with ThreadPoolExecutor(10) as pool:
            responses = list(pool.map(lambda i: _start(daemon, f"rush-{i}"), range(10)))
        statuses = sorted(response.status_code for response in responses)
        print(f"10 concurrent new sessions under a cap of 3: {statuses}")
        assert statuses == [200] * 3 + [429] * 7
        for response in responses:
            if response.status_code == 429:
                assert "max_sessions" in _refusal(response)
        assert len(daemon.containers(docker_client)) == 3
        assert "at most 3 sandbox containers, 3 per caller" in daemon.output()


def test_unset_caps_follow_the_host_pids_and_memory() -> None:
    gib = 1024**3
    roomy = HostFigures(pid_max=32768, memory_bytes=24 * gib)
    # pids: 24576 usable / 512 = 48; memory: 2 x 24 GiB / 2 GiB = 24.
    caps = SessionCaps.derive(pids=512, memory_bytes=2 * gib, host=roomy)
    assert (caps.total, caps.per_caller) == (24, 18)
    # Few pids: 3072 usable / 512 = 6, fewer than the memory allows.
    few_pids = HostFigures(pid_max=4096, memory_bytes=24 * gib)
    assert SessionCaps.derive(pids=512, memory_bytes=2 * gib, host=few_pids).total == 6
    # A small host still gets the floor.
    small = HostFigures(pid_max=4096, memory_bytes=2 * gib)
    floor = SessionCaps.derive(pids=512, memory_bytes=2 * gib, host=small)
    assert (floor.total, floor.per_caller) == (4, 3)
    # An unreadable figure is left out; set values win over derived ones.
    unknown = HostFigures(pid_max=None, memory_bytes=None)
    assert SessionCaps.derive(pids=512, memory_bytes=2 * gib, host=unknown).total == 4
    chosen = SessionCaps.derive(pids=512, memory_bytes=2 * gib, total=64, host=small)
    assert (chosen.total, chosen.per_caller) == (64, 48)


def test_host_figures_come_from_proc() -> None:
    figures = HostFigures.read()
    assert figures.pid_max == int(Path("/proc/sys/kernel/pid_max").read_text())
    assert figures.memory_bytes is not None and figures.memory_bytes > 0


def test_a_per_caller_cap_over_the_total_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="max_sessions_per_caller"):
        config_from_mapping({"max_sessions": 2, "max_sessions_per_caller": 3}, source="t.toml")
    with pytest.raises(ConfigError, match="max_sessions"):
        config_from_mapping({"max_sessions": 0}, source="t.toml")


@pytest.mark.docker
def test_failed_starts_and_idle_containers_give_their_slot_back(docker_client: Any) -> None:
    missing = "sandboxd-test-missing:never"
    config = (
        f'max_sessions = 1\nidle_ttl_s = 1\nallowed_images = ["{missing}"]\n'
        "max_sessions_per_caller = 1\n"
    )
    with running_daemon(docker_client, config) as daemon, daemon.client() as client:
        for _ in range(2):
            failed = client.post("/v1/run", json={"command": "true", "image": missing})
            assert failed.status_code == 503, failed.text
        assert _start(daemon, "first").status_code == 200
        assert _refusal(_start(daemon, "second"))
        deadline = time.monotonic() + 30
        while client.get("/v1/health").json()["containers"]:
            assert time.monotonic() < deadline, "the idle container was not removed"
            time.sleep(0.2)
        assert _start(daemon, "second").status_code == 200


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_sessions_started_without_a_command_count_against_the_caps(docker_client: Any) -> None:
    """Attack: hold containers by starting sessions (POST /v1/sessions/{id}/start) instead of
    running commands."""
    config = "max_sessions = 2\nmax_sessions_per_caller = 2\n"
    with running_daemon(docker_client, config) as daemon, daemon.client() as http:
        # Five sessions asked for at once: two start, three are refused by the cap.
        with ThreadPoolExecutor(5) as pool:
            answers = list(
                pool.map(lambda n: http.post(f"/v1/sessions/cap-{n}/start", json={}), range(5))
            )
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [200, 200, 429, 429, 429], [a.text for a in answers]
        assert "max_sessions" in _refusal(next(a for a in answers if a.status_code == 429))
        assert len(daemon.containers(docker_client)) == 2
        # A running session's start is never refused: it takes no new place.
        running = next(n for n, a in enumerate(answers) if a.status_code == 200)
        again = http.post(f"/v1/sessions/cap-{running}/start", json={})
        assert again.json()["state"] == "running"
