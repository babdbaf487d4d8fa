"""The installed logos's version, as trajectories and `--version` record it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def logos_version() -> str:
    try:
        return version("logos")
    except PackageNotFoundError:
        return "unknown"
