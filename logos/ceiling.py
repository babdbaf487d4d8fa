"""A caller's ceiling: the host directories a front granted it, pinned when they were granted,
within which every path it is given must lie, checked where the path is mounted.

A front that narrows a caller's paths (`sandboxd mcp`, a project's agents, `logos serve`'s
runs, `logos batch`'s tasks) may check a path early, but a path is a name, and a name can be
swapped (a directory renamed away and a symlink put in its place) between that check and the
moment a sandbox resolves it again to mount it. So the front sends the sandbox its ceiling
along with the paths, and the sandbox decides on what it is about to mount.

WHY a root is pinned by device and inode, taken from a descriptor of the directory itself
(`O_PATH | O_NOFOLLOW` on its resolved path, never a second look up of the name): a root swapped
for a symlink after it was granted no longer has the identity it was granted with, so what
the symlink leads to is not inside it.

WHY a path is placed by walking up from a descriptor of it (`openat(fd, "..")`, comparing
each directory's device and inode with the roots', up to the file system's root) and not by
comparing names: the walk follows the directory the sandbox will mount, wherever it is now,
and no name on the way is trusted. A directory has one parent, so its ancestors are the
same however it was reached; a mount point's parent is the directory it is mounted on.

What a walk cannot see: a root whose directory was removed, its inode number then given to a
new directory outside the roots. Only someone who can make directories outside them can
arrange that, and a root a sandbox mounts cannot be removed from inside it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeAlias

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

_MAX_DEPTH = 4096
"""Directories a walk up climbs at most: a deeper one is refused rather than followed."""
_DIRECTORY_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathAccess(Protocol):
    """A host path and whether it is read-only: an AllowedPath, or a wire model of one."""

    @property
    def path(self) -> str: ...

    @property
    def read_only(self) -> bool: ...


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class CeilingRoot:
    """A directory (or a file) granted to a caller, as it was when it was granted."""

    path: str
    """Resolved when it was granted; for messages (the identity is what decides)."""
    read_only: bool
    device: int
    inode: int

    def describe(self) -> str:
        return f"{self.path} ({'read-only' if self.read_only else 'read-write'})"


PathCeiling: TypeAlias = tuple[CeilingRoot, ...]
"""The roots of one caller; a path must lie within one with at least the access it asks."""


class CeilingError(ValueError):
    """A granted path cannot be pinned, or a path cannot be placed: the message says why and
    what to do."""


def pin_root(path: str, *, read_only: bool) -> CeilingRoot:
    """The directory (or file) `path` names now, pinned: its identity from a descriptor of it.
    A granted file holds only itself.

    Raises CeilingError when it does not exist, is neither, or changes while pinned."""
    try:
        resolved = os.path.realpath(path, strict=True)
        fd = os.open(resolved, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CeilingError(
            f"the granted path {path} cannot be pinned: {os_reason(exc)}; grant an existing "
            "directory"
        ) from None
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise CeilingError(
            f"the granted path {path} is neither a directory nor a regular file (a symlink "
            "swapped in, a socket, a device?): grant an existing directory"
        )
    return CeilingRoot(resolved, read_only, info.st_dev, info.st_ino)


def ceiling_of(granted: Iterable[PathAccess]) -> PathCeiling:
    """The ceiling of a caller granted `granted` (each pinned now, in order): the one place a
    front turns its grants into a ceiling. Raises CeilingError naming a path that cannot be."""
    return tuple(pin_root(p.path, read_only=p.read_only) for p in granted)


def holding_roots(
    directory_fd: int, ceiling: PathCeiling, *, file: os.stat_result | None = None
) -> tuple[CeilingRoot, ...]:
    """The roots of `ceiling` at or above the directory `directory_fd` is open on, found by
    walking up with `..` to the file system's root; for a `file` in that directory, the roots
    that are that file too. Raises OSError when a step cannot be opened, CeilingError when
    the walk is deeper than MAX_DEPTH."""
    by_identity: dict[tuple[int, int], list[CeilingRoot]] = {}
    for root in ceiling:
        by_identity.setdefault((root.device, root.inode), []).append(root)
    found = [] if file is None else list(by_identity.get((file.st_dev, file.st_ino), ()))
    fd = os.open(".", _DIRECTORY_FLAGS, dir_fd=directory_fd)
    try:
        info = os.fstat(fd)
        for _ in range(_MAX_DEPTH):
            found.extend(by_identity.get((info.st_dev, info.st_ino), ()))
            parent = os.open("..", _DIRECTORY_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            above = os.fstat(fd)
            if (above.st_dev, above.st_ino) == (info.st_dev, info.st_ino):
                return tuple(found)
            info = above
    finally:
        os.close(fd)
    raise CeilingError(f"a path lies more than {_MAX_DEPTH} directories deep: it is not placed")


def admits(holders: Sequence[CeilingRoot], *, read_only: bool) -> bool:
    """Whether roots holding a path let it be mounted with that access: any one of them that
    is read-write does, and read-only needs no more than being held."""
    return any(read_only or not root.read_only for root in holders)


def outside_ceiling(
    asked: str,
    resolved: str,
    *,
    read_only: bool,
    holders: Sequence[CeilingRoot],
    ceiling: PathCeiling,
) -> str:
    """The one wording of a refusal by a ceiling, for the sandbox and for a front's early
    check: the path (and where it leads), the roots, and what to do."""
    shown = asked if asked == resolved else f"{asked} (resolves to {resolved})"
    if holders:
        inside = ", ".join(root.describe() for root in holders)
        return (
            f"refused {shown} read-write: the paths granted to this caller hold it only "
            f"read-only ({inside}); a caller can narrow its paths, never widen them: ask for "
            "it read-only"
        )
    granted = ", ".join(root.describe() for root in ceiling) or "none"
    return (
        f"refused {shown}: it is outside the paths granted to this caller ({granted}); a "
        "caller can narrow its paths, never widen them: ask for one of them or a path inside "
        "one. If one was removed and made again since it was granted, grant it again"
    )


def early_refusal(path: str, *, read_only: bool, ceiling: PathCeiling) -> str | None:
    """Why `ceiling` refuses `path` as it is now (resolved and placed as the sandbox would), or
    None: a front's early check, for a friendly error before the sandbox is asked. The name
    may change before the sandbox resolves it again: the sandbox's own check decides."""
    try:
        resolved = os.path.realpath(path, strict=True)
        holders = _holders_of(resolved, ceiling)
    except OSError as exc:
        return f"refused {path}: {os_reason(exc)}; pass an existing path inside the granted ones"
    except CeilingError as exc:
        return f"refused {path}: {exc}"
    if admits(holders, read_only=read_only):
        return None
    return outside_ceiling(path, resolved, read_only=read_only, holders=holders, ceiling=ceiling)


def _holders_of(resolved: str, ceiling: PathCeiling) -> tuple[CeilingRoot, ...]:
    """The roots holding `resolved`: a directory's, or a file's directory's."""
    fd = os.open(resolved, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return holding_roots(fd, ceiling)
    finally:
        os.close(fd)
    fd = os.open(os.path.dirname(resolved), _DIRECTORY_FLAGS)
    try:
        return holding_roots(fd, ceiling, file=info)
    finally:
        os.close(fd)


def os_reason(exc: OSError) -> str:
    """Why a path could not be looked at, in words."""
    if exc.errno == errno.ENOENT:
        return "it does not exist"
    if exc.errno == errno.ENOTDIR:
        return "it (or a directory on its way) is no directory"
    if exc.errno == errno.ELOOP:
        return "it is (or became) a symlink, or a symlink loop"
    if exc.errno == errno.EINVAL:  # a symlink gone between its lstat and its readlink
        return "it changed while it was looked at (renamed, or swapped with a symlink)"
    if exc.errno == errno.EACCES:
        return "it may not be looked up"
    return exc.strerror or str(exc)
