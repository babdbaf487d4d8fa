"""Finding a test's processes in /proc, to prove that nothing it started survived."""

from __future__ import annotations

import os
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
