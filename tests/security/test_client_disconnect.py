"""Every way a client can go away kills its command and leaves a 499 line in the audit log.

The attack: a client that sent one more byte after its request and then closed was not
noticed (the daemon stopped watching the connection once it saw pipelined data), so its
command ran on to its timeout, up to an hour. Each pattern below is performed on a real
socket against a real daemon, with the command already running in its container.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.sandboxd_harness import Daemon

pytestmark = pytest.mark.docker

KILLED_WITHIN_S = 10.0


def _request(command: str, session: str) -> bytes:
    body = json.dumps({"command": command, "session": session, "timeout_s": 600}).encode()
    head = (
        "POST /v1/run HTTP/1.1\r\nHost: sandboxd\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def _close(sock: socket.socket) -> None:
    sock.close()


def _extra_byte_then_close(sock: socket.socket) -> None:
    sock.sendall(b"x")
    time.sleep(0.5)  # the daemon reads the byte on its own before the close comes
    sock.close()


def _half_close(sock: socket.socket) -> None:
    sock.shutdown(socket.SHUT_WR)


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


GOING_AWAY: dict[str, Callable[[socket.socket], None]] = {
    "close": _close,
    "extra-byte-then-close": _extra_byte_then_close,
    "half-close": _half_close,
    "reset": _reset,
}


def _running(http: httpx.Client, session: str) -> int:
    for listed in http.get("/v1/sessions").json()["sessions"]:
        if listed["id"] == session:
            return int(listed["running"])
    return 0


def _audit(daemon: Daemon) -> list[dict[str, Any]]:
    return [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]


def _processes(http: Any, session: str) -> str:
    answer = http.post("/v1/run", json={"command": "ps -eo args", "session": session})
    return str(answer.json()["stdout"])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pattern", sorted(GOING_AWAY))
def test_a_client_going_away_kills_its_command(daemon: Daemon, pattern: str) -> None:
    session = f"gone-{pattern}"
    command = f"sleep 30; echo {pattern} outlived its client"
    with daemon.client() as http:
        assert http.post("/v1/run", json={"command": "true", "session": session}).is_success
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(daemon.socket))
        try:
            sock.sendall(_request(command, session))
            deadline = time.monotonic() + 30
            while _running(http, session) != 1:
                assert time.monotonic() < deadline, "the command never started"
                time.sleep(0.05)
            GOING_AWAY[pattern](sock)
            gone = time.monotonic()
            while _running(http, session) != 0:
                waited = time.monotonic() - gone
                assert waited < KILLED_WITHIN_S, f"the command still runs {waited:.0f} s later"
                time.sleep(0.1)
            # WHY looked at again: the supervisor kills the group as the daemon lets the
            # command go; on a busy machine ps may run before the kill has landed.
            while "sleep 30" in (listed := _processes(http, session)):
                waited = time.monotonic() - gone
                assert waited < KILLED_WITHIN_S, f"{waited:.0f} s later:\n{listed}"
                time.sleep(0.1)
        finally:
            sock.close()
    records = [r for r in _audit(daemon) if r.get("command") == command]
    assert [r["status"] for r in records] == [499], records


@pytest.mark.timeout(60)
def test_a_client_vanishing_mid_body_leaves_a_499_line(daemon: Daemon) -> None:
    request = _request("echo never started", "gone-mid-body")
    head, _, body = request.partition(b"\r\n\r\n")
    earlier = len(_audit(daemon))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(daemon.socket))
        sock.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
        time.sleep(0.5)
    deadline = time.monotonic() + KILLED_WITHIN_S
    while len(_audit(daemon)) == earlier:
        assert time.monotonic() < deadline, "the request left no audit line"
        time.sleep(0.1)
    (record,) = _audit(daemon)[earlier:]
    assert (record["status"], record["method"], record["path"]) == (499, "POST", "/v1/run")
    assert "went away" in record["error"], record
    with daemon.client() as http:
        sessions = http.get("/v1/sessions").json()["sessions"]
    assert all(listed["id"] != "gone-mid-body" for listed in sessions), sessions


@pytest.mark.timeout(60)
def test_more_than_a_request_of_pipelined_data_ends_the_request(daemon: Daemon) -> None:
    session = "gone-flooding"
    command = "sleep 30; echo flooded"
    with daemon.client() as http:
        assert http.post("/v1/run", json={"command": "true", "session": session}).is_success
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(daemon.socket))
            sock.sendall(_request(command, session))
            deadline = time.monotonic() + 30
            while _running(http, session) != 1:
                assert time.monotonic() < deadline, "the command never started"
                time.sleep(0.05)
            sock.settimeout(10)
            sent = 0
            try:
                while sent < 64 * 1024**2:
                    sock.sendall(b"x" * 65536)
                    sent += 65536
            except OSError:
                pass  # the daemon closed the connection
            assert sent < 4 * 1024**2, f"the daemon took {sent} bytes while the request ran"
        deadline = time.monotonic() + KILLED_WITHIN_S
        while _running(http, session) != 0:
            assert time.monotonic() < deadline, "the command still runs"
            time.sleep(0.1)
    records = [r for r in _audit(daemon) if r.get("command") == command]
    assert [r["status"] for r in records] == [499], records
