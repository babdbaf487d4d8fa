"""Start a daemon on demand: a cluster node that a batch task lands on may have none running.

The daemon is started detached (its own session, output to a private log), so it outlives
the task that started it and serves the node's later tasks. Tasks that find no daemon at the
same moment take turns on a lock file next to the socket: the first starts one, the others
find it answering.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sandboxd.client.connection import check_health
from sandboxd.paths import default_state_dir, lock_path, open_lock_file

START_TIMEOUT_S = 60.0
"""The daemon sweeps stray containers and checks the engine before it serves."""
_POLL_S = 0.1
_LOG_NAME = "autostart.log"
_START_LOCK_SUFFIX = ".start-lock"


class AutostartError(ValueError):
    """No daemon could be made to answer; the message says why and what to do."""


def ensure_serving(socket_path: Path, *, timeout_s: float = START_TIMEOUT_S) -> None:
    """Return once a healthy daemon answers on `socket_path`, starting one if none does."""
    if check_health(socket_path).problem is None:
        return
    with _starting(socket_path):
        check = check_health(socket_path)
        if check.problem is None:
            return  # another caller started it while this one waited for the lock
        if check.reached:  # a daemon (or something else) is there but cannot run commands
            raise AutostartError(check.problem)
        _start(socket_path, timeout_s)


@contextlib.contextmanager
def _starting(socket_path: Path) -> Iterator[None]:
    """Hold the node's start lock (callers in other processes wait their turn)."""
    if not socket_path.parent.exists():
        socket_path.parent.mkdir(mode=0o700, parents=True)
    lock = socket_path.with_name(socket_path.name + _START_LOCK_SUFFIX)
    fd = open_lock_file(lock, AutostartError)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _start(socket_path: Path, timeout_s: float) -> None:
    log = default_state_dir() / _LOG_NAME
    process = _spawn(socket_path, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(_POLL_S)
        check = check_health(socket_path)
        if check.problem is None:
            return
        if check.reached and check.answer is not None:
            raise AutostartError(check.problem)
        if process.poll() is not None and not _lock_held(socket_path):
            raise AutostartError(
                f"sandboxd could not start on {socket_path} (exit status {process.returncode}): "
                f"{_tail(log)}; see {log}"
            )
    raise AutostartError(
        f"sandboxd started on {socket_path} did not answer within {timeout_s:g} s: see {log}"
    )


def _spawn(socket_path: Path, log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "sandboxd", "serve", "--socket", os.fspath(socket_path)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        os.close(fd)


def _lock_held(socket_path: Path) -> bool:
    """Whether a daemon (started by someone else meanwhile) holds the socket's lock."""
    try:
        fd = os.open(lock_path(socket_path), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        lines = log.read_text(errors="replace").strip().splitlines()
        if lines:
            return lines[-1]
    return "no output"
