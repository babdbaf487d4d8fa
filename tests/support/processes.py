"""Finding a test's processes in /proc, to prove that nothing it started survived, and waiting
for what they do."""

from __future__ import annotations

import os
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
