"""A checked path, held open, and the identity a container's mount must show.

WHY: the policy checks a path by name, and the engine resolves the same name again when it
creates the bind mount. Whoever can rename entries on the way (the user, or a sandboxed command
with the parent directory mounted read-write) can swap in a symlink between the two. So the
policy pins what it checked: each component of the resolved path is opened without following
symlinks (`O_PATH | O_NOFOLLOW`), and the last one is kept open while the container starts, so
its inode cannot be freed and reused. The container then reports the device, inode and type of
each mount root as it sees them; any difference means the engine mounted something else, and the
container is destroyed before any command runs (see sandboxd.docker.backend).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from typing import Literal

Kind = Literal["directory", "file", "other"]


@dataclass(frozen=True)
class FileIdentity:
    """What a path named when it was checked: its device, inode and type."""

    device: int
    inode: int
    kind: Kind

    @classmethod
    def of(cls, info: os.stat_result) -> FileIdentity:
        return cls(info.st_dev, info.st_ino, kind_of(info.st_mode))

    def describe(self) -> str:
        return f"{self.kind} {self.device}:{self.inode}"


def kind_of(mode: int) -> Kind:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


class PathChangedError(Exception):
    """A component of a resolved path is no longer what resolution found (e.g. now a symlink)."""


@dataclass(frozen=True)
class PinnedPath:
    """A resolved path held open with an `O_PATH` descriptor; `close()` lets it go."""

    path: str
    identity: FileIdentity
    fd: int

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def pin(resolved: str) -> PinnedPath:
    """Open `resolved` (absolute, symlinks already resolved) one component at a time, never
    following a symlink, and keep the last descriptor.

    Raises PathChangedError when a component is a symlink or not a directory any more (the path
    changed since it was resolved), OSError when a component cannot be opened.
    """
    if not resolved.startswith("/"):
        raise ValueError(f"pin() needs an absolute path, got {resolved!r}")
    flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags | os.O_DIRECTORY)
    try:
        parts = [part for part in resolved.split("/") if part]
        for position, part in enumerate(parts):
            if part in (".", ".."):
                raise PathChangedError(f"{resolved} is not a resolved path ({part!r} in it)")
            try:
                child = os.open(part, flags, dir_fd=fd)
            except NotADirectoryError:
                raise PathChangedError(
                    f"{'/' + '/'.join(parts[:position])} is no longer a directory"
                ) from None
            os.close(fd)
            fd = child
            info = os.fstat(fd)
            if stat.S_ISLNK(info.st_mode):
                raise PathChangedError(
                    f"{'/' + '/'.join(parts[: position + 1])} became a symlink while it was checked"
                )
            if position < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
                raise PathChangedError(
                    f"{'/' + '/'.join(parts[: position + 1])} is no longer a directory"
                )
        identity = FileIdentity.of(os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return PinnedPath(resolved, identity, fd)


def identify(path: str) -> FileIdentity:
    """The identity of `path` now (for callers that build a mount without a policy check)."""
    pinned = pin(os.path.realpath(path, strict=True))
    pinned.close()
    return pinned.identity
