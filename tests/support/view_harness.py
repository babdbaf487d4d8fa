"""`logos view FILE` as a subprocess, for tests that open a saved run or report in a browser."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.cli_harness import Home
from tests.support.processes import stop_server

_OPEN = re.compile(r"logos view: open (\S+)")


@contextlib.contextmanager
def viewing(home: Home, file: Path) -> Iterator[str]:
    """`logos view FILE` in a subprocess; the URL it prints."""
    log = home.root / f"view-{time.monotonic_ns()}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "logos", "view", str(file), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=home.work,
        )
    try:
        deadline = time.monotonic() + 30
        while not (found := _OPEN.search(log.read_text())):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield found.group(1)
    finally:
        assert stop_server(proc, "logos view", log.read_text, signal.SIGTERM, 30) == 0
