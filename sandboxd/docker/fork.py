"""Copy what a sandbox's commands changed outside its mounts into other sandboxes (a fork).

The root filesystem is read-only, so a sandbox's own state is its tmpfs places (/tmp and
$HOME, see sandboxd.docker.container.Layout); the mounts are host directories the forks
mount themselves. One `tar -c` in the source, as the session's uid, streamed once and fanned
out to a `tar -x` in each target, as the same uid: no file passes through the host's disk,
nothing is read or written with more rights than the session's own commands have, and what
is copied is bounded by the source's tmpfs sizes, which the targets share.
"""

from __future__ import annotations

import shlex
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from docker.utils.socket import read as read_socket

IO_TIMEOUT_S = 120.0
"""A source or target that neither sends nor takes a byte for this long fails the fork."""
CHUNK = 1024 * 1024
MAX_ERROR_BYTES = 4096
EXIT_WAIT_S = 5.0

# WHY find | tar --null -T: the tmpfs roots themselves (owned by root, or mode 1777) are not
# archive members, so extracting never tries to change their owner, mode or times.
# WHY --one-file-system and the excludes: a mount under /tmp or $HOME is a host directory,
# never part of the copy (the forks mount it themselves); the excludes also leave out the
# directories the engine made for it (root's: no command could have changed them).
SOURCE_SCRIPT = (
    'find "$@" -mindepth 1 -maxdepth 1 -print0 | tar -C / --one-file-system --anchored '
    "{excludes} --null -T - -cf - 2>&1 1>&3 | head -c 4096 >&2"
)
TARGET_COMMAND = ["tar", "-C", "/", "-xf", "-"]


class ForkCopyError(Exception):
    """The copy failed; the message says where (source or which target) and why."""


@dataclass(frozen=True)
class CopyPlan:
    source: str
    """The source container's id."""
    targets: Sequence[str]
    user: str
    """uid:gid both ends run as."""
    roots: Sequence[str]
    """The source's tmpfs places (absolute), copied with their contents."""
    mounts: Sequence[str] = ()
    """The mounts' paths (absolute): never copied."""

    def excludes(self) -> list[str]:
        """Relative to /: each entry of a root that is, or holds, a mount."""
        names = set()
        for mount in self.mounts:
            for root in self.roots:
                if mount.startswith(root.rstrip("/") + "/"):
                    top = mount[len(root.rstrip("/")) + 1 :].split("/")[0]
                    names.add(f"{root.strip('/')}/{top}")
        return sorted(names)


def copy_changes(api: Any, plan: CopyPlan) -> int:
    """Copy (blocking: run it on a worker thread); the bytes of the archive sent to each."""
    if not plan.roots:
        return 0
    targets = []
    try:
        for target in plan.targets:
            exec_id = api.exec_create(target, TARGET_COMMAND, stdin=True, user=plan.user)["Id"]
            targets.append((target, exec_id, _raw(api.exec_start(exec_id, socket=True))))
        source_id = api.exec_create(
            plan.source,
            # Relative to / (the exec's workdir): tar then has no leading "/" to warn about.
            ["/bin/sh", "-c", f"exec 3>&1; {_source_script(plan)}", "sandboxd-fork"]
            + [root.lstrip("/") for root in plan.roots],
            user=plan.user,
            workdir="/",
        )["Id"]
        source = api.exec_start(source_id, socket=True)
        try:
            sent, source_errors = _fan_out(source, targets)
        finally:
            source.close()
        for _, _, sock in targets:
            sock.shutdown(socket.SHUT_WR)
        for target, exec_id, sock in targets:
            errors = _drain(sock)
            code = _exit_code(api, exec_id)
            if code != 0:
                raise ForkCopyError(
                    f"extracting into {target[:12]} failed (status {code}): {errors or '-'}"
                )
        code = _exit_code(api, source_id)
        if code != 0 or source_errors:
            raise ForkCopyError(
                f"archiving the source failed (status {code}): {source_errors or '-'}"
            )
        return sent
    finally:
        for _, _, sock in targets:
            sock.close()


def _source_script(plan: CopyPlan) -> str:
    excludes = " ".join(shlex.quote(f"--exclude={name}") for name in plan.excludes())
    return SOURCE_SCRIPT.format(excludes=excludes)


def _raw(sock: Any) -> socket.socket:
    """The socket under docker-py's exec socket (its SocketIO wrapper cannot half-close)."""
    raw = getattr(sock, "_sock", sock)
    raw.settimeout(IO_TIMEOUT_S)
    return raw  # type: ignore[no-any-return]


def _fan_out(source: Any, targets: list[tuple[str, str, socket.socket]]) -> tuple[int, str]:
    """Send the source's stdout to every target; its stdout bytes and its stderr (capped)."""
    _raw(source)
    pending = bytearray()
    errors = bytearray()
    sent = 0
    while True:
        data = read_socket(source, CHUNK)
        if not data:
            return sent, errors.decode(errors="replace").strip()
        pending += data
        while len(pending) >= 8:
            size = int.from_bytes(pending[4:8], "big")
            if len(pending) < 8 + size:
                break
            stream, payload = pending[0], bytes(pending[8 : 8 + size])
            del pending[: 8 + size]
            if stream == 2:
                errors += payload[: max(0, MAX_ERROR_BYTES - len(errors))]
                continue
            for target, _, sock in targets:
                try:
                    sock.sendall(payload)
                except OSError as exc:
                    raise ForkCopyError(
                        f"extracting into {target[:12]} stopped taking data: {exc}"
                    ) from exc
            sent += len(payload)


def _drain(sock: socket.socket) -> str:
    """A target's output once its input ended (tar -x says nothing unless it fails)."""
    collected = bytearray()
    while chunk := sock.recv(65536):
        collected += chunk[: max(0, MAX_ERROR_BYTES - len(collected))]
    text = bytearray()
    while len(collected) >= 8:  # the multiplexed frames' payloads
        size = int.from_bytes(collected[4:8], "big")
        text += collected[8 : 8 + size]
        del collected[: 8 + size]
    return text.decode(errors="replace").strip()


def _exit_code(api: Any, exec_id: str) -> int | None:
    give_up = time.monotonic() + EXIT_WAIT_S
    while True:
        info = api.exec_inspect(exec_id)
        if not info["Running"]:
            code = info.get("ExitCode")
            return int(code) if code is not None else None
        if time.monotonic() >= give_up:
            return None
        time.sleep(0.01)
