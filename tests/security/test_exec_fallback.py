"""Attacks on the `docker exec` fallback (images without python3), through a real daemon.

- Long exec commands must not starve the engine calls everything else needs: with as many
  `sleep 15` as the daemon has engine workers, health and a new container's start must
  still answer while they run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

WORKERS = 8
HOLD_S = 15


@pytest.fixture(scope="module")
def daemon(docker_client: Any, busybox_image: str) -> Iterator[Daemon]:
    config = f'allowed_images = ["{busybox_image}"]\nmax_workers = {WORKERS}\n'
    with running_daemon(docker_client, config) as serving:
        yield serving


def _running(client: httpx.Client, session: str) -> int:
    sessions = client.get("/v1/sessions").json()["sessions"]
    return sum(entry["running"] for entry in sessions if entry["id"] == session)


@pytest.mark.timeout(180)
def test_exec_commands_do_not_hold_up_health_or_new_containers(
    daemon: Daemon, busybox_image: str
) -> None:
    client = daemon.client()
    warm = client.post(
        "/v1/run", json={"command": "true", "image": busybox_image, "session": "hold"}
    )
    assert warm.status_code == 200 and warm.json()["exit_code"] == 0, warm.text

    def hold(_: int) -> httpx.Response:
        with daemon.client() as own:
            return own.post(
                "/v1/run",
                json={"command": f"sleep {HOLD_S}", "image": busybox_image, "session": "hold"},
            )

    with ThreadPoolExecutor(WORKERS) as pool:
        holds = [pool.submit(hold, i) for i in range(WORKERS)]
        deadline = time.monotonic() + 30
        while _running(client, "hold") < WORKERS:
            assert time.monotonic() < deadline, "the sleeps did not all start"
            time.sleep(0.05)
        time.sleep(1.0)  # let every exec reach its engine stream

        started = time.monotonic()
        health = client.get("/v1/health")
        health_s = time.monotonic() - started
        fresh = client.post("/v1/run", json={"command": "echo fresh", "session": "fresh"})
        still_running = _running(client, "hold")

        results = [future.result() for future in holds]
    print(f"health answered in {health_s:.2f} s with {WORKERS} exec commands running")
    assert health.status_code == 200, health.text
    assert health_s < 2.0, f"health took {health_s:.2f} s while exec commands ran"
    assert fresh.status_code == 200 and fresh.json()["stdout"] == "fresh\n", fresh.text
    assert still_running == WORKERS, "the new container started only after the sleeps ended"
    assert all(r.status_code == 200 and r.json()["exit_code"] == 0 for r in results)
