"""A worker never exceeds its project: an agent's allowed paths and hosts must lie within
the project's, unless the person grants more explicitly. Paths are resolved (symlinks,
`..`) before they are compared. Pure, but for resolving paths."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence

from logos.serve.projects.wire import SavedPath


def resolved(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def beyond_paths(agent: Sequence[SavedPath], project: Sequence[SavedPath]) -> list[str]:
    """What of `agent`'s paths the project does not allow, each said with why."""
    problems = []
    for path in agent:
        holders = [outer for outer in project if _within(path.path, outer.path)]
        if not holders:
            problems.append(f"{path.path} is outside the project's paths")
        elif not path.read_only and all(outer.read_only for outer in holders):
            problems.append(f"{path.path} is read-only in the project, asked read-write")
    return problems


def beyond_hosts(agent: Sequence[str], project: Sequence[str]) -> list[str]:
    return [
        f"host {host} is not among the project's"
        for host in agent
        if not any(host == allowed or fnmatch.fnmatchcase(host, allowed) for allowed in project)
    ]
