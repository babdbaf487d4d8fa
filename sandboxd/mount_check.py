"""Before a container runs any command: is what it mounted what the policy checked?

The supervisor reports, for each mount root, the device, inode and type it sees at that path
inside the container (sandboxd.supervisor.report_mounts); images without python3 are asked the
same another way (the Docker backend's `docker exec` of `stat`: sandboxd.docker.mount_report).
Any difference from the identity the policy
pinned (sandboxd.pinned) means the engine resolved a swapped name: the container is destroyed.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandboxd.backend import Mount, MountChangedError
from sandboxd.supervisor_client import MountSeen


def check_mounts(mounts: Sequence[Mount], seen: Sequence[MountSeen]) -> None:
    """Raise MountChangedError naming the first mount whose root is not what was checked."""
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
