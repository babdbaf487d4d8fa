"""Connection exhaustion: idle connections past the open-files limit must not end the daemon.

The attack: with the usual soft limit of 1,024 open files, about a thousand idle connections
made `accept()` fail with EMFILE, which ended the accept loop and the daemon with it (every
running command lost). Here 1,500 idle connections are opened against a daemon started with
a 1,024 limit, while a command runs on another connection.
"""

from __future__ import annotations

import contextlib
import resource
import shlex
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.parts import require
from tests.support.sandboxd_harness import Daemon, running_daemon, short_dir

pytestmark = pytest.mark.docker

IDLE_CONNECTIONS = 1500
STARTING_LIMIT = 1024
CONNECT_TIMEOUT_S = 5.0


def _python_under_limit(ulimit_option: str) -> str:
    """An interpreter wrapper that starts the daemon with RLIMIT_NOFILE set by `ulimit`."""
    wrapper = short_dir("lim") / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"ulimit {ulimit_option} {STARTING_LIMIT} || exit 97\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@contextlib.contextmanager
def _room_for_sockets(count: int) -> Iterator[None]:
    """Let this test process hold `count` sockets of its own (CI shells often give 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = count + 256
    require(
        hard == resource.RLIM_INFINITY or hard >= needed,
        f"this test holds {count} sockets: it needs a hard open-files limit of {needed}",
    )
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _open_idle_connections(daemon: Daemon, count: int) -> tuple[list[socket.socket], str | None]:
    """Connect `count` times without sending anything; stops early if the daemon dies."""
    held: list[socket.socket] = []
    for index in range(count):
        if index % 50 == 0 and daemon.proc.poll() is not None:
            return held, f"the daemon exited after {index} idle connections"
        try:
            held.append(_connect(daemon.socket))
        except OSError as exc:
            return held, f"connection {index + 1} failed: {exc}"
    return held, None


def _connect(path: Path) -> socket.socket:
    """A connection, retried while the listen backlog is full (as any client would)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)
            continue
        except OSError:
            sock.close()
            raise
        return sock


def _wait_for_running(http: httpx.Client, session: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sessions = http.get("/v1/sessions").json()["sessions"]
        if any(s["id"] == session and s["running"] == 1 for s in sessions):
            return
        time.sleep(0.05)
    raise AssertionError(f"the command of session {session} never started")


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("ulimit_option", "config"),
    [("-Sn", ""), ("-n", "max_connections = 4096\n")],
    ids=["soft-limit-1024", "hard-limit-1024-too"],
)
def test_1500_idle_connections_leave_the_daemon_serving(
    docker_client: Any, ulimit_option: str, config: str
) -> None:
    """With the hard limit at 1,024 too, the daemon cannot raise it: it lowers its
    connection cap below the limit instead (asked for 4,096 here, so that it must)."""
    python = _python_under_limit(ulimit_option)
    with (
        _room_for_sockets(IDLE_CONNECTIONS + 64),
        running_daemon(docker_client, config, python=python) as daemon,
    ):
        soft, hard = resource.prlimit(daemon.proc.pid, resource.RLIMIT_NOFILE)
        if ulimit_option == "-Sn":
            # The daemon raised its own soft limit to the hard one at start.
            assert soft == hard > STARTING_LIMIT, (soft, hard)
        else:
            assert soft == hard == STARTING_LIMIT, (soft, hard)
        with daemon.client() as http:
            assert http.post("/v1/run", json={"command": "true", "session": "busy"}).is_success

        answers: list[httpx.Response | Exception] = []

        def in_flight() -> None:
            with daemon.client() as busy:
                try:
                    answers.append(
                        busy.post(
                            "/v1/run", json={"command": "sleep 2; echo done", "session": "busy"}
                        )
                    )
                except httpx.HTTPError as exc:
                    answers.append(exc)

        runner = threading.Thread(target=in_flight)
        runner.start()
        with daemon.client() as http:
            _wait_for_running(http, "busy")
        held, problem = _open_idle_connections(daemon, IDLE_CONNECTIONS)
        try:
            assert problem is None, f"{problem}\n{daemon.output()[-3000:]}"
            assert daemon.proc.poll() is None, daemon.output()[-3000:]
            runner.join(60)
            assert len(answers) == 1, "the command in flight never answered"
            (answer,) = answers
            assert isinstance(answer, httpx.Response), answer
            assert answer.status_code == 200, answer.text
            assert answer.json()["stdout"] == "done\n"
            with daemon.client(timeout=30) as http:
                started = time.monotonic()
                health = http.get("/v1/health")
                took = time.monotonic() - started
            assert health.status_code == 200, health.text
            assert took < 10, f"health took {took:.1f} s with {len(held)} connections open"
        finally:
            for sock in held:
                sock.close()
        with daemon.client(timeout=30) as http:
            assert http.get("/v1/health").status_code == 200
        assert daemon.proc.poll() is None
        log = daemon.output()
        if ulimit_option == "-n":
            assert "max_connections" in log and "lowered" in log, log[-3000:]


@pytest.mark.timeout(180)
def test_accept_failing_with_emfile_backs_off_and_keeps_serving(docker_client: Any) -> None:
    """The open-files limit lowered under a running daemon, past its connection cap: every
    accept fails with EMFILE until descriptors free up, and the daemon must ride that out."""
    lowered = 300
    with (
        _room_for_sockets(IDLE_CONNECTIONS),
        running_daemon(docker_client, "max_connections = 4096\n") as daemon,
    ):
        with daemon.client() as http:
            assert http.get("/v1/health").status_code == 200
        resource.prlimit(daemon.proc.pid, resource.RLIMIT_NOFILE, (lowered, lowered))
        held, problem = _open_idle_connections(daemon, 2 * lowered)
        try:
            assert problem is None, f"{problem}\n{daemon.output()[-3000:]}"
            time.sleep(2)  # accepting fails over and over meanwhile
            assert daemon.proc.poll() is None, daemon.output()[-3000:]
        finally:
            for sock in held:
                sock.close()
        with daemon.client(timeout=30) as http:
            assert http.get("/v1/health").status_code == 200
        log = daemon.output()
    failures = log.count("cannot accept connections")
    assert 1 <= failures <= 5, log[-3000:]
    assert "Too many open files" in log
    assert "accepting connections again" in log
