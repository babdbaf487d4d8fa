"""A measurement taken in a process of its own (`python -m bench.MODULE ARGS`), so that what
it measures (peak memory, a model's load) is that process's alone; its report is the JSON of
its last line of output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.daemon import BenchSetupError

REPO = Path(__file__).resolve().parent.parent


def child_report(module: str, *args: str, timeout_s: float) -> dict[str, Any]:
    """Run the child; its last line of output parsed. A child that fails or says nothing is a
    setup error that quotes the end of its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BenchSetupError(
            f"{module} failed with status {done.returncode}:\n{done.stderr.strip()[-2000:]}"
        )
    report: dict[str, Any] = json.loads(lines[-1])
    return report
