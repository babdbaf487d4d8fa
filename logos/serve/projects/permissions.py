"""A worker never exceeds its project: an agent's allowed paths and hosts must lie within
the project's, and it gets no network, unless the person grants more explicitly: the
project is the ceiling its agents narrow (`logos.options.narrowing`). Paths are pinned when
granted: an agent's sandbox is held to the roots it was granted, as they were then (its
ceiling, logos.ceiling), so a path swapped for a symlink later leads nowhere new. Pure, but
for resolving and pinning paths."""

from __future__ import annotations

import os
from collections.abc import Sequence

from logos.ceiling import CeilingRoot, PathCeiling, pin_root
from logos.options import AllowedPath
from logos.options.declarations import ALLOW, ALLOW_HOST, NETWORK
from logos.options.narrowing import Ceiling
from logos.options.option import Place
from logos.serve.projects.wire import AgentRecord, ProjectRecord, SavedPath


def pinned(path: str, read_only: bool) -> SavedPath:
    """`path` (`~` expanded) granted now: resolved and pinned. Raises CeilingError (a
    ValueError that says why) when it cannot be."""
    root = pin_root(os.path.expanduser(path), read_only=read_only)
    return SavedPath(path=root.path, read_only=read_only, device=root.device, inode=root.inode)


def project_ceiling(project: ProjectRecord, *, sandbox: bool) -> Ceiling:
    """What an agent of `project` may be given without a grant: a part of its paths (all
    of them by default) and of its hosts (all of them by default, in a sandbox), and no
    network."""
    return Ceiling.of(
        "the project",
        (Place.PROJECT,),
        {ALLOW: None, ALLOW_HOST: tuple(project.allowed_hosts), NETWORK: False},
        defaults={
            ALLOW: tuple(AllowedPath(p.path, p.read_only) for p in project.allowed_paths),
            ALLOW_HOST: tuple(project.allowed_hosts) if sandbox else (),
        },
        paths=_roots(project.allowed_paths),
    )


def agent_ceiling(project: Sequence[SavedPath], agent: AgentRecord) -> PathCeiling:
    """The roots an agent's sandbox is held to: the project's paths, and its own when the
    person granted it more, each as it was pinned when granted (a path that could not be
    pinned is no root: it cannot be mounted anyway)."""
    return _roots([*project, *(agent.allowed_paths if agent.granted else ())])


def _roots(granted: Sequence[SavedPath]) -> PathCeiling:
    return tuple(
        CeilingRoot(p.path, p.read_only, p.device, p.inode)
        for p in granted
        if p.device is not None and p.inode is not None
    )
