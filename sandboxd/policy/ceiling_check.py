"""The daemon holds a request's mounts to its caller's ceiling (logos.ceiling), on what it
pinned: when the policy pins each path (sandboxd.policy.policy), and again once the
container's mounts are made (sandboxd.docker.mount_check).

WHY on the pinned descriptor: the policy's pin is what the container must show at the mount
(its identity is checked there), so walking up from that descriptor places the very directory
the sandbox gets, not whatever its name leads to a moment later. A file has no `..`: its
directory is pinned as well, and must still hold the pinned file under its name.
"""

from __future__ import annotations

import os
import posixpath

from logos.ceiling import CeilingRoot, PathCeiling, admits, holding_roots, outside_ceiling
from sandboxd.policy.pinned import FileIdentity, PathChangedError, PinnedPath, pin


def ceiling_refusal(
    raw: str, pinned: PinnedPath, *, read_only: bool, ceiling: PathCeiling
) -> str | None:
    """Why `ceiling` refuses the pinned path (asked for as `raw`), or None.

    Raises PathChangedError when a file's directory no longer holds it, OSError when a step of
    the walk cannot be opened, CeilingError when the walk is too deep."""
    if pinned.identity.kind == "directory":
        holders = holding_roots(pinned.fd, ceiling)
    else:
        holders = _file_holders(pinned, ceiling)
    if admits(holders, read_only=read_only):
        return None
    return outside_ceiling(raw, pinned.path, read_only=read_only, holders=holders, ceiling=ceiling)


def mounted_refusal(
    path: str, identity: FileIdentity, *, read_only: bool, ceiling: PathCeiling
) -> str | None:
    """`ceiling_refusal` of a mount once the container made it: `path` pinned again, which must
    still be the file or directory it mounted (PathChangedError otherwise).

    WHY pinned again rather than the policy's descriptor: a warm pool starts sandboxes for a
    spec long after its request let its descriptors go. The identity compared first makes the
    walk start from the very directory mounted (a directory has one parent), and a name that
    leads elsewhere by now is a refusal to retry, never a pass."""
    pinned = pin(path)
    try:
        if pinned.identity != identity:
            raise PathChangedError(
                f"{path} is now {pinned.identity.describe()}, and {identity.describe()} was mounted"
            )
        return ceiling_refusal(path, pinned, read_only=read_only, ceiling=ceiling)
    finally:
        pinned.close()


def _file_holders(pinned: PinnedPath, ceiling: PathCeiling) -> tuple[CeilingRoot, ...]:
    directory = pin(posixpath.dirname(pinned.path))
    try:
        name = posixpath.basename(pinned.path)
        child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory.fd)
        try:
            held = os.fstat(child)
        finally:
            os.close(child)
        if FileIdentity.of(held) != pinned.identity:
            raise PathChangedError(f"{directory.path} no longer holds {name} as it was checked")
        return holding_roots(directory.fd, ceiling, file=held)
    finally:
        directory.close()
