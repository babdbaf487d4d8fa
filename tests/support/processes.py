"""Finding a test's processes in /proc, to prove that nothing it started survived, waiting
for what they do, and stopping the servers they started."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path


def processes_matching(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def wait_for(condition: Callable[[], object], timeout: float = 60.0) -> bool:
    """Whether `condition` came true within `timeout` seconds (polled every 0.05 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def running(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`argv` started in the background, stdin closed, stdout and stderr piped as text; killed
    if it still runs when the block ends, so that a failing test leaves nothing behind."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        cwd=cwd,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def interrupt(
    proc: subprocess.Popen[str], *signals: int, timeout: float, apart: float = 0.3
) -> tuple[str, str]:
    """Send `signals` (`apart` seconds apart), as a user pressing Ctrl-C does, and wait for the
    program to end: what it wrote to stdout and to stderr."""
    for number, sig in enumerate(signals):
        if number:
            time.sleep(apart)
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=timeout)
    return stdout, stderr


def stop_server(
    proc: subprocess.Popen[bytes], what: str, output: Callable[[], str], sig: int, timeout: float
) -> int:
    """Send `sig` to a server the test started and wait for its exit status; one that does
    not stop in time is killed, and the test fails with its output."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{what} did not stop within {timeout} s:\n{output()}") from None
