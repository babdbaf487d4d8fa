"""A worker never exceeds its project: an agent's allowed paths and hosts must lie within
the project's, unless the person grants more explicitly. Paths are resolved (symlinks,
`..`) before they are compared, and pinned when granted: an agent's sandbox is held to the
roots it was granted, as they were then (its ceiling, logos.ceiling), so a path swapped for
a symlink later leads nowhere new. Pure, but for resolving and pinning paths."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence

from logos.ceiling import CeilingRoot, PathCeiling, pin_root
from logos.serve.projects.wire import AgentRecord, SavedPath


def pinned(path: str, read_only: bool) -> SavedPath:
    """`path` (`~` expanded) granted now: resolved and pinned. Raises CeilingError (a
    ValueError that says why) when it cannot be."""
    root = pin_root(os.path.expanduser(path), read_only=read_only)
    return SavedPath(path=root.path, read_only=read_only, device=root.device, inode=root.inode)


def agent_ceiling(project: Sequence[SavedPath], agent: AgentRecord) -> PathCeiling:
    """The roots an agent's sandbox is held to: the project's paths, and its own when the
    person granted it more, each as it was pinned when granted (a path that could not be
    pinned is no root: it cannot be mounted anyway)."""
    granted = [*project, *(agent.allowed_paths if agent.granted else ())]
    return tuple(
        CeilingRoot(p.path, p.read_only, p.device, p.inode)
        for p in granted
        if p.device is not None and p.inode is not None
    )


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
