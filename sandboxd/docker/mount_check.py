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

Last, with the caller's ceiling (logos.ceiling): each mount, pinned again and still what the
container shows, must still lie within it, so a directory moved out of a root between the
policy's check and the mount is caught too (sandboxd.policy.ceiling_check).
"""

from __future__ import annotations

from collections.abc import Sequence

from logos.ceiling import CeilingError, PathCeiling, os_reason
from sandboxd.backend import Mount, MountChangedError, OutsideCeilingError
from sandboxd.docker.supervisor_client import MountSeen
from sandboxd.policy.ceiling_check import mounted_refusal
from sandboxd.policy.mount_table import printable, read_mountinfo, uncovered_mount_points
from sandboxd.policy.pinned import PathChangedError

_DESTROYED = "the sandbox was destroyed before any command ran"


def check_mounts(
    mounts: Sequence[Mount], seen: Sequence[MountSeen], *, ceiling: PathCeiling | None = None
) -> None:
    """Raise MountChangedError naming the first mount whose root is not what was checked, or
    a mount point that appeared beneath a read-only mount since the check; with a `ceiling`,
    OutsideCeilingError naming a mount no longer within it."""
    _check_seen(mounts, seen)
    _check_nothing_new_beneath(mounts)
    if ceiling is not None:
        _check_within_ceiling(mounts, ceiling)


def _check_seen(mounts: Sequence[Mount], seen: Sequence[MountSeen]) -> None:
    """Raise MountChangedError naming the first mount whose root the new sandbox does not
    see as pinned."""
    if len(seen) != len(mounts):
        raise MountChangedError(
            f"the sandbox reported {len(seen)} mounts for {len(mounts)} requested: it was "
            "destroyed before any command ran; retry"
        )
    problem = seen_problem(mounts, seen)
    if problem is not None:
        raise MountChangedError(
            f"{problem}. It changed between the check and the mount (renamed, or swapped "
            "with a symlink), so the sandbox was destroyed before any command ran; retry "
            "once nothing renames it or its parent directories"
        )


def seen_problem(mounts: Sequence[Mount], seen: Sequence[MountSeen]) -> str | None:
    """The first mount whose root the sandbox does not see as pinned, in words; None when
    each is."""
    if len(seen) != len(mounts):
        return f"the sandbox reported {len(seen)} mounts for its {len(mounts)}"
    for mount, found in zip(mounts, seen, strict=True):
        problem = _difference(mount, found)
        if problem is not None:
            return f"{mount.path} is not what was checked once mounted: {problem}"
    return None


def _check_within_ceiling(mounts: Sequence[Mount], ceiling: PathCeiling) -> None:
    """Raise OutsideCeilingError naming the first mount that no longer lies within `ceiling`
    with its access, MountChangedError for one that cannot be placed any more."""
    for mount in mounts:
        try:
            refused = mounted_refusal(
                mount.path, mount.identity, read_only=mount.read_only, ceiling=ceiling
            )
        except (PathChangedError, OSError, CeilingError) as exc:
            why = os_reason(exc) if isinstance(exc, OSError) else str(exc)
            raise MountChangedError(
                f"{mount.path} could not be placed within the paths granted to its caller once "
                f"mounted ({why}): {_DESTROYED}; retry once nothing renames it or its parent "
                "directories"
            ) from None
        if refused is not None:
            raise OutsideCeilingError(
                f"{refused} (it was moved between the check and the mount: {_DESTROYED})"
            )


def _check_nothing_new_beneath(mounts: Sequence[Mount]) -> None:
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
