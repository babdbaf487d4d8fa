"""Six concurrent commands each flooding both streams with 8 MiB of control characters, the
largest output a request may keep: each answer is about 100 MB of JSON (six bytes per
character). Built whole, three of them in flight took the daemon to about 490 MB; streamed as
they are encoded, its resident memory must stay under 400 MB, and every answer must still be
the whole output, byte for byte.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support.sampling import PeakOf, rss_bytes
from tests.support.sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

MIB = 1024**2
BIG_OUTPUT = 8 * MIB
FLOOD = f"head -c {BIG_OUTPUT} /dev/zero | tr '\\0' '\\1' | tee /dev/stderr"
PEAK_LIMIT = 400 * 1000**2


def _flood(daemon: Daemon, session: str) -> dict[str, Any]:
    with daemon.client(timeout=300) as http:
        answer = http.post(
            "/v1/run",
            json={"command": FLOOD, "session": session, "max_output_bytes": BIG_OUTPUT},
        )
        assert answer.status_code == 200, answer.text[:300]
        return dict(json.loads(answer.content))


@pytest.mark.timeout(300)
def test_six_control_character_floods_stay_under_400_mb(docker_client: Any) -> None:
    with running_daemon(docker_client) as daemon:
        with ThreadPoolExecutor(6) as pool:  # warm: the floods measure answers, not starts
            list(pool.map(lambda i: _flood(daemon, f"flood-{i}"), range(6)))
        baseline = rss_bytes(daemon.proc.pid)
        with PeakOf(lambda: rss_bytes(daemon.proc.pid)) as rss, ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda i: _flood(daemon, f"flood-{i}"), range(6)))
    print(f"six 2 x 8 MiB control floods: RSS {baseline / MIB:.0f} MiB, peak {rss.peak / MIB:.0f}")
    for answer in answers:
        assert answer["exit_code"] == 0
        assert answer["stdout"] == answer["stderr"] == "\x01" * BIG_OUTPUT
    assert rss.peak < PEAK_LIMIT, f"peak RSS {rss.peak / MIB:.0f} MiB"
