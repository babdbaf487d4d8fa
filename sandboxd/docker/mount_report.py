"""What an image without python3 sees at its mount roots: one `docker exec` of `stat`.

The supervisor reports this itself; without python3 the backend asks the container with a
shell script instead, and sandboxd.docker.mount_check compares the answer with what was checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandboxd.docker.supervisor_client import MountSeen
from sandboxd.policy.pinned import kind_of

EXEC_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Arguments: the mount roots. One line each: "<direct> <device> <inode> <mode in hex>", where
# direct is 1 when resolving the path followed no symlink; or "error <why>".
EXEC_REPORT = """for p; do
  if [ "$(readlink -f -- "$p" 2>/dev/null)" = "$p" ]; then direct=1; else direct=0; fi
  if seen=$(stat -c '%d %i %f' -- "$p" 2>&1); then echo "$direct $seen"; \
  else echo "error $seen" | tr '\\n' ' '; echo; fi
done
"""


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
