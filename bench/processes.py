"""The child processes a family starts (servers, daemons), stopped one way."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop_process(
    proc: subprocess.Popen[Any], timeout_s: float = 30.0, sig: int = signal.SIGTERM
) -> bool:
    """`sig` (SIGTERM), and `timeout_s` to exit; then it is killed. False when it had to be
    killed, for the caller to report in its own words (a slow stop may hide a bug)."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    return True
