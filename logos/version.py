"""The installed logos's version, as trajectories and `--version` record it."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version


@functools.cache
def logos_version() -> str:
    """WHY cached: it cannot change while the process runs, and reading it scans the
    installed packages' metadata (milliseconds; a batch records it for every task)."""
    try:
        return version("logos")
    except PackageNotFoundError:
        return "unknown"
