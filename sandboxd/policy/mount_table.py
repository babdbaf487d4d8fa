"""The host's mount points as this process sees them, from /proc/self/mountinfo.

WHY the policy needs them: the engine bind-mounts a granted directory recursively, and this
engine cannot make the copy read-only all the way down, so a file system mounted somewhere
under a read-only grant would stay writable in the sandbox. The policy finds those mount
points here and has each bound read-only too (sandboxd.policy).

WHY this process's table: the daemon and the engine share the host's mount namespace in every
supported setup; where they do not, the identity check the container makes before any
command runs (sandboxd.docker.mount_check) catches a mount point that leads elsewhere.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
DEVICE_FIELD, ROOT_FIELD, MOUNT_POINT_FIELD = 2, 3, 4
"""Fields of a mountinfo line: the file system's device (major:minor), the directory of it
the mount shows, and where the mount is (relative to this process's root)."""

_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3})")


def _decode_mountinfo_path(field: str) -> str:
    """A path as the kernel writes it in mountinfo: space, tab, newline and backslash are
    octal escapes (`\\040`, `\\011`, `\\012`, `\\134`); other bytes are as on disk."""
    encoded = field.encode("utf-8", "surrogateescape")
    decoded = _OCTAL_ESCAPE.sub(lambda match: bytes([int(match[1], 8)]), encoded)
    return decoded.decode("utf-8", "surrogateescape")


def printable(path: str) -> str:
    """`path` for a message: bytes that are not UTF-8 (kept by surrogateescape) as `\\xNN`,
    so that nothing downstream (JSON, the audit log) fails on them."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class MountEntry:
    """One line of mountinfo: where the mount is, which file system (its device) and which
    directory of that file system it shows (`/` for a whole one, more for a bind)."""

    point: str
    device: str
    root: str


def mount_entries(mountinfo: str) -> list[MountEntry]:
    """Every line of `mountinfo` (its text), decoded, in its order."""
    entries = []
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) > MOUNT_POINT_FIELD:
            entries.append(
                MountEntry(
                    point=_decode_mountinfo_path(fields[MOUNT_POINT_FIELD]),
                    device=fields[DEVICE_FIELD],
                    root=_decode_mountinfo_path(fields[ROOT_FIELD]),
                )
            )
    return entries


def _mount_points(mountinfo: str) -> tuple[str, ...]:
    """Every mount point in `mountinfo` (its text), decoded, each once, sorted."""
    return tuple(sorted({entry.point for entry in mount_entries(mountinfo)}))


def other_names(entry: MountEntry, entries: Sequence[MountEntry]) -> list[str]:
    """The paths by which what `entry` shows is reached through the other mounts of its file
    system (a bind of /run/docker.sock shows `/docker.sock` of the tmpfs mounted at /run:
    `/run/docker.sock`). Empty when nothing else shows it (a file system mounted only there).
    """
    names = []
    for other in entries:
        if other == entry or other.device != entry.device or not is_inside(entry.root, other.root):
            continue
        rest = entry.root[len(other.root.rstrip("/")) :].lstrip("/")
        names.append(posixpath.normpath(posixpath.join(other.point, rest)) if rest else other.point)
    return names


def _mount_points_below(directory: str, mountinfo: str) -> tuple[str, ...]:
    """The mount points strictly inside `directory` (resolved, absolute), sorted."""
    return tuple(
        point
        for point in _mount_points(mountinfo)
        if point != directory and is_inside(point, directory)
    )


def read_mountinfo() -> str:
    """This process's mount table (OSError when /proc is not there)."""
    return MOUNTINFO.read_bytes().decode("utf-8", "surrogateescape")


def uncovered_mount_points(
    mounts: Sequence[tuple[str, bool]], mountinfo: str
) -> list[tuple[str, str]]:
    """(mount point, the read-only path holding it) for each mount point beneath a read-only
    path of `mounts` (path, read_only) that is not one of `mounts` itself: the engine would
    bring it along writable. A mount point belongs to the innermost path holding it, so one
    inside a read-write path is not listed (it stays as the host has it)."""
    paths = {path for path, _ in mounts}
    found = []
    for path, read_only in mounts:
        if not read_only:
            continue
        for point in _mount_points_below(path, mountinfo):
            holder = max((p for p in paths if is_inside(point, p)), key=len)
            if holder == path and point not in paths:
                found.append((point, path))
    return found


def is_inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or below it (both normalised, absolute). WHY strings:
    `Path.is_relative_to` costs microseconds, and the policy asks this of every rule."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")
