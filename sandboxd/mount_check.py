"""Before a container runs any command: is what it mounted what the policy checked?

The supervisor reports, for each mount root, the device, inode and type it sees at that path
inside the container (sandboxd.supervisor.report_mounts); images without python3 are asked the
same through one `docker exec` of `stat` (below). Any difference from the identity the policy
pinned (sandboxd.pinned) means the engine resolved a swapped name: the container is destroyed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandboxd.backend import Mount, MountChangedError
from sandboxd.pinned import kind_of
from sandboxd.supervisor_client import MountSeen

EXEC_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Arguments: the mount roots. One line each: "<direct> <device> <inode> <mode in hex>", where
# direct is 1 when resolving the path followed no symlink; or "error <why>".
EXEC_REPORT = """for p; do
  if [ "$(readlink -f -- "$p" 2>/dev/null)" = "$p" ]; then direct=1; else direct=0; fi
  if seen=$(stat -c '%d %i %f' -- "$p" 2>&1); then echo "$direct $seen"; \
  else echo "error $seen" | tr '\\n' ' '; echo; fi
done
"""


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


def parse_exec_report(output: str, count: int) -> list[MountSeen]:
    """The `EXEC_REPORT` script's lines as MountSeen (an unreadable line is an error)."""
    lines = output.splitlines()
    seen = []
    for position in range(count):
        line = lines[position] if position < len(lines) else ""
        seen.append(_parse_exec_line(line))
    return seen


def _parse_exec_line(line: str) -> MountSeen:
    fields = line.split()
    if len(fields) == 4 and fields[0] in ("0", "1"):
        try:
            device, inode, mode = int(fields[1]), int(fields[2]), int(fields[3], 16)
        except ValueError:
            pass
        else:
            return MountSeen(
                device=device, inode=inode, kind=kind_of(mode), direct=fields[0] == "1"
            )
    reason = line.removeprefix("error ").strip() or "no answer"
    return MountSeen(error=f"`stat` in the image failed: {reason[:300]}")


def exec_report(api: Any, container_id: str, user: str, paths: Sequence[str]) -> str:
    """Run `EXEC_REPORT` in the container (blocking: run it on the worker pool)."""
    exec_id = api.exec_create(
        container_id,
        ["/bin/sh", "-c", EXEC_REPORT, "sandboxd-mounts", *paths],
        user=user,
        environment={"PATH": EXEC_PATH},
        workdir="/",
    )["Id"]
    return bytes(api.exec_start(exec_id)).decode("utf-8", "replace")
