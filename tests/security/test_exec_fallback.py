"""Attacks on the `docker exec` fallback (images without python3), through a real daemon.

- Long exec commands must not starve the engine calls everything else needs: with as many
  `sleep 15` as the daemon has engine workers, health and a new container's start must
  still answer while they run.
- A request's env must not reach the wrapper that enforces the timeout: a PATH pointing at
  planted `setsid`/`sleep`/`kill` must neither run them nor disarm the watchdog.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandboxd.docker.exec_fallback import BACKSTOP_MARGIN_S
from tests.support.sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

WORKERS = 8
HOLD_S = 15


@pytest.fixture(scope="module")
def daemon(docker_client: Any, busybox_image: str, dash_exec_image: str) -> Iterator[Daemon]:
    # WHY unix sockets: images without python3 cannot have them denied (no supervisor).
    config = (
        f'allowed_images = ["{busybox_image}", "{dash_exec_image}"]\nmax_workers = {WORKERS}\n'
        "allow_unix_sockets = true\n"
    )
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
        "/v1/run",
        json={"command": "true", "image": busybox_image, "session": "hold", "unix_sockets": True},
    )
    assert warm.status_code == 200 and warm.json()["exit_code"] == 0, warm.text

    def hold(_: int) -> httpx.Response:
        with daemon.client() as own:
            return own.post(
                "/v1/run",
                json={
                    "command": f"sleep {HOLD_S}",
                    "image": busybox_image,
                    "session": "hold",
                    "unix_sockets": True,
                },
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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("image_fixture", ["dash_exec_image", "busybox_image"])
def test_a_request_path_cannot_hijack_the_timeout_watchdog(
    daemon: Daemon, image_fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    image = request.getfixturevalue(image_fixture)
    evil = tmp_path / "evil"
    evil.mkdir()
    ran = tmp_path / "ran"
    ran.mkdir()
    for tool in ("setsid", "sleep", "kill"):
        fake = evil / tool
        # Each fake leaves a mark, then neuters the watchdog: no new session for setsid,
        # an endless wait for sleep, nothing at all for kill.
        action = {
            "setsid": 'exec "$@"',
            "sleep": "exec /bin/sleep 1000",
            "kill": "exit 0",
        }[tool]
        fake.write_text(f'#!/bin/sh\necho "$$ $*" >> {ran}/{tool}\n{action}\n')
        fake.chmod(0o755)
    client = daemon.client()
    greeting = "it's a 'quoted' $value"
    fields = {
        "image": image,
        "unix_sockets": True,
        "session": "hijack",
        "allowed_paths": [
            {"path": str(evil), "read_only": True},
            {"path": str(ran), "read_only": False},
        ],
        "env": {"PATH": str(evil), "GREETING": greeting},
    }
    # The request's env still reaches the command itself, values intact (this also starts
    # the container, so that the timing below is the command's alone).
    echoed = client.post("/v1/run", json={"command": 'echo "$PATH|$GREETING"', **fields})
    assert echoed.json()["stdout"] == f"{evil}|{greeting}\n", echoed.text

    timeout_s = 2.0
    started = time.monotonic()
    response = client.post(
        "/v1/run", json={"command": "/bin/sleep 30", "timeout_s": timeout_s, **fields}
    )
    elapsed = time.monotonic() - started
    body = response.json()
    assert response.status_code == 200, response.text
    print(f"sleep 30 with a {timeout_s:g} s timeout and a hijacked PATH: {elapsed:.2f} s")
    assert sorted(path.name for path in ran.iterdir()) == [], "a planted tool ran"
    assert body["timed_out"], body
    # The host's backstop steps in only after BACKSTOP_MARGIN_S: the watchdog must be first.
    assert elapsed < timeout_s + BACKSTOP_MARGIN_S, f"took {elapsed:.1f} s"
