"""Finding a test's processes in /proc, to prove that nothing it started survived, waiting
for what they do, and stopping the servers they started."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
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
