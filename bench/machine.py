"""What the numbers were measured on: they mean little without it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def machine_info() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_bytes": _memory_bytes(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "docker": _docker_versions(),
        "load_average": list(os.getloadavg()),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


def summary_line(info: dict[str, Any]) -> str:
    docker = info["docker"].get("server") or "no engine"
    load = ", ".join(f"{value:.1f}" for value in info["load_average"])
    commit = info["commit"] or "unknown commit"
    if info["uncommitted_changes"]:
        commit += " + local changes"
    return (
        f"{info['cpu_count']} CPUs ({info['cpu_model']}), kernel {info['kernel']}, "
        f"Docker {docker}, Python {info['python']}, load {load} at start, {commit}"
    )


QUIET_BUSY_SHARE = 0.15
"""A machine whose CPUs are busy less than this share of the time counts as quiet."""


def wait_until_quiet(max_wait_s: float = 30.0, window_s: float = 0.5) -> tuple[float, float]:
    """Wait until the CPUs are quiet (at most `max_wait_s`); returns (waited s, busy share).

    WHY: a family that ends with containers still being torn down (the throughput family
    starts 64) leaves the engine busy for seconds, and the next family's figures (the loop
    and the parser are pure CPU) would measure that instead. Without /proc/stat (not
    Linux) there is nothing to wait on.
    """
    started = time.monotonic()
    busy = 0.0
    while True:
        before = _cpu_times()
        if before is None:
            return 0.0, 0.0
        time.sleep(window_s)
        after = _cpu_times()
        if after is None:
            return 0.0, 0.0
        total = after[0] - before[0]
        busy = (total - (after[1] - before[1])) / total if total > 0 else 0.0
        waited = time.monotonic() - started
        if busy < QUIET_BUSY_SHARE or waited >= max_wait_s:
            return waited, busy


def _cpu_times() -> tuple[int, int] | None:
    """All CPUs' (total, idle + iowait) jiffies from /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields), fields[3] + fields[4]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _docker_versions() -> dict[str, str | None]:
    try:
        import docker

        client = docker.from_env()
        try:
            version = client.version()
        finally:
            client.close()
    except Exception as exc:  # no engine is a fact to record, not a failure here
        return {"server": None, "api": None, "error": str(exc)}
    return {"server": version.get("Version"), "api": version.get("ApiVersion")}


def _git(*args: str) -> str | None:
    try:
        completed = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip()
