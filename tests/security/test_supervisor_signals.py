"""Attack: end (or stop) the sandbox's supervisor from inside, with a signal.

Issue "Containment 5": a command ended its own sandbox's supervisor with `kill -INT 1`,
`kill -TERM 1` or a pidfd's signal (it had handlers for SIGTERM, and Python's for SIGINT),
killing every command and job of the session. PID 1 gets no signal from inside its PID
namespace that it has no handler for; the supervisor now has none but SIGCHLD's (its reaper's
wake-up), so these are dropped, and only the daemon ends it (SIGKILL from outside).
"""

from __future__ import annotations

import shlex

import httpx
import pytest

from tests.support.sandboxd_harness import Daemon

pytestmark = [pytest.mark.docker]

SIGNALS = r"""
import os, signal

for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGALRM", "SIGSTOP"):
    os.kill(1, getattr(signal, name))  # delivered or dropped: the caller is not told
pidfd = os.pidfd_open(1)
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.pidfd_send_signal(pidfd, sig)
os.close(pidfd)
print("sent")
"""
START_TIME = "cut -d' ' -f22 /proc/1/stat"


def run(client: httpx.Client, command: str, timeout_s: float = 20) -> dict[str, object]:
    answer = client.post(
        "/v1/run", json={"session": "signals", "command": command, "timeout_s": timeout_s}
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_no_signal_from_inside_ends_or_stops_the_supervisor(daemon: Daemon) -> None:
    with daemon.client(timeout=60) as client:
        before = run(client, START_TIME)
        assert before["exit_code"] == 0, before
        job = run(client, "sleep 300 & echo started")  # a job the session keeps
        assert job["stdout"] == "started\n", job
        shell = run(client, "kill -INT 1; kill -TERM 1; kill -HUP 1; kill -QUIT 1; echo sent")
        assert (shell["exit_code"], shell["stdout"]) == (0, "sent\n"), shell
        pidfd = run(client, shlex.join(["python3", "-c", SIGNALS]))
        assert (pidfd["exit_code"], pidfd["stdout"]) == (0, "sent\n"), pidfd
        after = run(client, f"{START_TIME}; pgrep -c -f 'sleep 300'", timeout_s=10)
        assert after["error"] is None, after
        assert after["sandbox"] == before["sandbox"], "the session got a new sandbox"
        assert after["stdout"] == f"{before['stdout']}1\n", "the supervisor or its job ended"
        # It still reaps what commands leave: an orphan that exits leaves no zombie.
        reaped = run(client, "(sleep 0.1 &); sleep 1; ps -eo stat= | grep -c '^Z' || true")
        assert reaped["stdout"] == "0\n", reaped
