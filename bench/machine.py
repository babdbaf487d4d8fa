"""What the numbers were measured on: they mean little without it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
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
