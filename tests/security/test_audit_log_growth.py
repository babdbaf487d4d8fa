"""The audit log's growth is bounded: each line has a hard maximum size, the file rotates.

The attack: the audit line of a request held its whole command (and paths, and error), so
400 refused 1 MiB requests added 400 MB to the log; nothing ever rotated it. Here the same
400 requests may add at most 400 lines of the stated maximum, the cut fields keep their
head and their full length, and with a small max size the log rotates and never exceeds it.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from sandboxd.api import MAX_REQUEST_BODY_BYTES
from sandboxd.server.audit import AUDIT_LINE_MAX_BYTES, COMMAND_HEAD_BYTES
from tests.support.sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

REQUESTS = 400
KIB = 1024


def _big_refused_request(index: int) -> dict[str, Any]:
    """A 1 MiB body refused by the policy after its command and path were noted."""
    return {
        "command": f"echo {index} " + "x" * (MAX_REQUEST_BODY_BYTES - 600),
        "allowed_paths": [{"path": "/etc"}],
    }


def _send(daemon: Daemon, count: int) -> None:
    with daemon.client() as http:
        for index in range(count):
            body = json.dumps(_big_refused_request(index)).encode()
            assert len(body) <= MAX_REQUEST_BODY_BYTES
            response = http.post("/v1/run", content=body)
            assert response.status_code == 403, response.text


def _audit_files(daemon: Daemon) -> list[Path]:
    return sorted(daemon.audit_log.parent.glob(daemon.audit_log.name + "*"))


@pytest.mark.timeout(300)
def test_400_refused_mebibyte_requests_add_bounded_lines(docker_client: Any) -> None:
    with running_daemon(docker_client) as daemon:
        before = daemon.audit_log.stat().st_size
        _send(daemon, REQUESTS)
        growth = daemon.audit_log.stat().st_size - before
        lines = daemon.audit_log.read_bytes().splitlines()
    assert growth <= REQUESTS * AUDIT_LINE_MAX_BYTES, f"the log grew by {growth} bytes"
    records = [json.loads(line) for line in lines[-REQUESTS:]]
    for index, record in enumerate(records):
        assert record["status"] == 403
        assert record["command"].startswith(f"echo {index} xxx")
        assert len(record["command"].encode()) <= COMMAND_HEAD_BYTES
        assert record["command_bytes"] == len(_big_refused_request(index)["command"])
        assert "/etc" in record["error"]


@pytest.mark.timeout(300)
def test_the_log_rotates_by_size_and_never_exceeds_it(docker_client: Any) -> None:
    max_bytes = 256 * KIB
    config = f"audit_log_max_bytes = {max_bytes}\naudit_log_backups = 2\n"
    with running_daemon(docker_client, config) as daemon:
        _send(daemon, REQUESTS)
        with daemon.client() as http:
            assert http.get("/v1/health").status_code == 200
        files = _audit_files(daemon)
        names = [path.name for path in files]
        sizes = {path.name: path.stat().st_size for path in files}
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
        newest = [json.loads(line) for line in daemon.audit_log.read_bytes().splitlines()]
    base = daemon.audit_log.name
    assert names == [base, f"{base}.1", f"{base}.2"], names
    assert all(size <= max_bytes for size in sizes.values()), sizes
    assert sizes[f"{base}.1"] > max_bytes - AUDIT_LINE_MAX_BYTES, sizes
    assert set(modes.values()) == {0o600}, modes
    assert newest[-1]["path"] == "/v1/health"


def test_every_cut_field_keeps_its_head_and_its_length(docker_client: Any) -> None:
    long_path = "/" + "p" * 8000
    with running_daemon(docker_client) as daemon, daemon.client() as http:
        refused = http.post(
            "/v1/run",
            json={"command": "true", "allowed_paths": [{"path": long_path}]},
        )
        unknown_session = http.delete("/v1/sessions/" + "s" * 20000)
        records = [json.loads(line) for line in daemon.audit_log.read_bytes().splitlines()]
    assert refused.status_code == 403 and unknown_session.status_code == 400
    by_status = {record["status"]: record for record in records}
    path_refusal = by_status[403]
    assert long_path[:100] in path_refusal["error"]
    assert path_refusal["error_bytes"] > 8000 > len(path_refusal["error"].encode())
    session_refusal = by_status[400]
    assert session_refusal["session_bytes"] == 20000
    assert session_refusal["path_bytes"] == len("/v1/sessions/") + 20000
    assert all(len(json.dumps(record)) <= AUDIT_LINE_MAX_BYTES for record in records)
