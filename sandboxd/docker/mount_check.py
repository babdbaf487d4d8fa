"""Before a container runs any command: is what it mounted what the policy checked?

The supervisor reports, for each mount root, the device, inode and type it sees at that path
inside the container (sandboxd.inside.supervisor.report_mounts); images without python3 are
asked the same another way (the Docker backend's `docker exec` of `stat`:
sandboxd.docker.mount_report). Any difference from the identity the policy pinned
(sandboxd.policy.pinned) means the engine resolved a swapped name: the container is destroyed.

Then the host's mount table is read again: a mount point that appeared beneath a read-only
mount after the policy listed those (sandboxd.policy binds each read-only) came along
writable when the engine bound its parent, so that container is destroyed too, before any
command runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandboxd.backend import Mount, MountChangedError
from sandboxd.docker.supervisor_client import MountSeen
from sandboxd.policy.mount_table import printable, read_mountinfo, uncovered_mount_points


def check_mounts(mounts: Sequence[Mount], seen: Sequence[MountSeen]) -> None:
    """Raise MountChangedError naming the first mount whose root is not what was checked, or
    a mount point that appeared beneath a read-only mount since the check."""
    if len(seen) != len(mounts):
        raise MountChangedError(
            f"the sandbox reported {len(seen)} mounts for {len(mounts)} requested: it was "
            "destroyed before any command ran; retry"
        )
    for mount, found in zip(mounts, seen, strict=True):
        problem = _difference(mount, found)
        if problem is not None:
            raise MountChangedError(
                f"{mount.path} is not what was checked once mounted: {problem}. It changed "
                "between the check and the mount (renamed, or swapped with a symlink), so the "
                "sandbox was destroyed before any command ran; retry once nothing renames it "
                "or its parent directories"
            )
    check_nothing_new_beneath(mounts)


def check_nothing_new_beneath(mounts: Sequence[Mount]) -> None:
    """Raise MountChangedError naming a mount point beneath a read-only mount that is not
    mounted read-only of its own (made on the host after the policy's check)."""
    if not any(mount.read_only for mount in mounts):
        return
    try:
        mountinfo = read_mountinfo()
    except OSError as exc:
        raise MountChangedError(
            f"the daemon could not read its mount table again ({exc.strerror or exc}) to see "
            "that nothing was mounted beneath a read-only path since it was checked: the "
            "sandbox was destroyed before any command ran; retry"
        ) from None
    below = uncovered_mount_points([(m.path, m.read_only) for m in mounts], mountinfo)
    if below:
        point, holder = below[0]
        raise MountChangedError(
            f"{printable(point)} was mounted on the host beneath the read-only {holder} after "
            "it was checked, so it would have been writable in the sandbox: the sandbox was "
            "destroyed before any command ran; retry (the next check mounts it read-only)"
        )


def _difference(mount: Mount, found: MountSeen) -> str | None:
    expected = mount.identity
    if found.error is not None:
        return f"the sandbox could not look at it ({found.error})"
    if not found.direct:
        return "reaching it inside the sandbox follows a symlink"
    if (found.device, found.inode, found.kind) != (expected.device, expected.inode, expected.kind):
        return (
            f"the sandbox sees {found.kind} {found.device}:{found.inode} where the policy "
            f"checked {expected.describe()}"
        )
    return None
