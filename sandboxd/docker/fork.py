"""Copy what a sandbox's commands changed outside its mounts into other sandboxes (a fork).

The root filesystem is read-only, so a sandbox's own state is its tmpfs places (/tmp and
$HOME, see sandboxd.docker.container.Layout); the mounts are host directories the forks
mount themselves. One `tar -c` in the source, as the session's uid, its archive fanned out to
a `tar -x` in each target, as the same uid: no file passes through the host's disk, nothing
is read or written with more rights than the session's own commands have, and what is copied
is bounded by the source's tmpfs sizes, which the targets share.

The source is not trusted. Its tar runs with every other process of its sandbox stopped
(the supervisor's quiesce), so none writes into the copy while it is taken, and whatever comes
out of it is parsed here, member by member (`ArchiveCheck`): a member whose name, once
normalised, leaves the copied roots, is a mount or holds one, passes through a link member,
comes twice, or is not a file, directory, link or FIFO is refused (the fork fails with a 4xx
naming it); the rest is written anew, names normalised and setuid/setgid bits dropped, into the
targets. So what a target extracts never touches a path a fork mounts, by construction.

Two ways to carry the archive. Between supervised sandboxes (`copy_through_fifos`), each tar
gets a FIFO the backend made in its control directory; the backend relays the source's FIFO
into the targets' ones, so the engine carries no byte of it. Into or out of a sandbox whose
image has no python3 (no supervisor), the archive goes through the engine's exec streams
instead (`copy_changes`), once per target: several times slower.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import posixpath
import secrets
import select
import shlex
import socket
import tarfile
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import anyio
from docker.utils.socket import read as read_socket

from sandboxd.docker.fifo import make_fifo, open_reading, open_writing_early, unlink
from sandboxd.docker.supervisor_client import (
    ChannelLost,
    RunMessage,
    SupervisorChannel,
    SupervisorReply,
)
from sandboxd.inside import supervisor

IO_TIMEOUT_S = 120.0
"""A source or target that neither sends nor takes a byte for this long fails the fork."""
COPY_TIMEOUT_S = 300.0
"""A copy through pipes that takes longer fails the fork (its tars are killed)."""
REPLY_MARGIN_S = 10.0
CHUNK = 1024 * 1024
PIPE_BYTES = 1024 * 1024
"""Each pipe's buffer, when the kernel grants it (Linux's default for a user's pipe is 1 MiB
at most): fewer wake-ups per MB relayed."""
MAX_ERROR_BYTES = 4096
EXIT_WAIT_S = 5.0

# WHY find | tar --null -T: the tmpfs roots themselves (owned by root, or mode 1777) are not
# archive members, so extracting never tries to change their owner, mode or times.
# WHY --one-file-system and the excludes: a mount under /tmp or $HOME is a host directory,
# never part of the copy (the forks mount it themselves); the excludes also leave out the
# directories the engine made for it (root's: no command could have changed them).
ARCHIVE = (
    'find "$@" -mindepth 1 -maxdepth 1 -print0 | tar -C / --one-file-system --anchored '
    "{excludes} --null -T - -b {blocking} -cf -"
)
SOURCE_SCRIPT = ARCHIVE + " 2>&1 1>&3 | head -c 4096 >&2"
EXTRACT = ["tar", "-C", "/", "--anchored", "-p"]
"""With each mount's entry excluded (`CopyPlan.excludes`) and how to read the archive: an
archive, whoever made it, never writes where a fork mounts a host path. -p: each file's mode
as archived, not cut by the umask (tar's default for a user other than root)."""
PIPE = f'"${supervisor.PIPE_FD_VARIABLE}"'
PIPE_BLOCKING = 128
"""Records of 64 KiB through the pipes (tar's default is 10 KiB): a fifth less CPU per MB
copied; -B on the extracting side, which may read a record in pieces from its pipe."""


class ForkCopyError(Exception):
    """The copy failed; the message says where (source or which target) and why."""


class _Stalled(ForkCopyError):
    """No byte moved for IO_TIMEOUT_S: what the tars then say (an archive cut short) is not
    the cause."""


class ArchiveRefused(ForkCopyError):
    """A member of the source's archive that no fork may get; the message names it."""


_KEPT_TYPES = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "directory",
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hard link",
    tarfile.FIFOTYPE: "FIFO",
}


@dataclass
class ArchiveCheck:
    """What a fork may get of the source's archive, member by member, in order."""

    roots: Sequence[str]
    """The copied roots, absolute (the source's tmpfs places)."""
    mounts: Sequence[str]
    """What the source and the forks mount, absolute: never entered, never held."""
    _seen: set[str] = field(default_factory=set)
    _links: set[str] = field(default_factory=set)
    _files: set[str] = field(default_factory=set)

    def accept(self, member: tarfile.TarInfo) -> tarfile.TarInfo:
        """The member as a fork gets it, or ArchiveRefused."""
        name = self._normalise(member.name, member)
        kind = _KEPT_TYPES.get(member.type)
        if kind is None:
            raise self._refused(member, "it is a device or a member of no kind a fork gets")
        if name in self._seen:
            raise self._refused(member, "it comes twice")
        clean = member.replace(name=name, uid=0, gid=0, uname="", gname="", deep=False)
        clean.mode = member.mode & 0o1777
        if member.type == tarfile.LNKTYPE:
            target = self._normalise(member.linkname, member)
            if target not in self._files:
                raise self._refused(member, "it links to no file the archive holds")
            clean.linkname = target
        self._seen.add(name)
        if member.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
            self._links.add(name)
        elif kind == "file":
            self._files.add(name)
        return clean

    def _normalise(self, raw: str, member: tarfile.TarInfo) -> str:
        name = posixpath.normpath(raw.lstrip("/"))
        if name in (".", "..") or name.startswith("../"):
            raise self._refused(member, "it leaves the copied directories")
        if not any(name.startswith(root.strip("/") + "/") for root in self.roots):
            raise self._refused(member, f"it is not inside {', '.join(self.roots)}")
        for mount in self.mounts:
            relative = mount.strip("/")
            if _within(name, relative) or _within(relative, name):
                raise self._refused(member, f"it is or holds the mounted path {mount}")
        parts = name.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in self._links:
                raise self._refused(member, "it passes through a link")
        return name

    @staticmethod
    def _refused(member: tarfile.TarInfo, why: str) -> ArchiveRefused:
        shown = member.name if len(member.name) <= 200 else member.name[:200] + "…"
        return ArchiveRefused(f"the session's archive holds {shown!r}, which no fork gets: {why}")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


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
    """The paths the source and the targets mount (absolute): never copied, never written."""

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
            command = [*_extract(plan), "-xf", "-"]
            exec_id = api.exec_create(target, command, stdin=True, user=plan.user)["Id"]
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
            sent, source_errors = _fan_out(source, targets, ArchiveCheck(plan.roots, plan.mounts))
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


def _extract(plan: CopyPlan) -> list[str]:
    """The extracting tar: it also leaves out every mount itself, wherever it is (an archive
    the source's tar made holds none, but one crafted by the session's commands could)."""
    mounts = {mount.strip("/") for mount in plan.mounts} - {""}
    names = sorted(set(plan.excludes()) | mounts)
    return [*EXTRACT, *(f"--exclude={name}" for name in names)]


def _excludes(plan: CopyPlan) -> str:
    return " ".join(shlex.quote(f"--exclude={name}") for name in plan.excludes())


def _source_script(plan: CopyPlan) -> str:
    return SOURCE_SCRIPT.format(excludes=_excludes(plan), blocking=20)


def _raw(sock: Any) -> socket.socket:
    """The socket under docker-py's exec socket (its SocketIO wrapper cannot half-close)."""
    raw = getattr(sock, "_sock", sock)
    raw.settimeout(IO_TIMEOUT_S)
    return raw  # type: ignore[no-any-return]


def _fan_out(
    source: Any, targets: list[tuple[str, str, socket.socket]], check: ArchiveCheck
) -> tuple[int, str]:
    """Check the source's stdout and send what a fork may get to every target; the bytes sent
    to each and the source's stderr (capped)."""
    _raw(source)
    pending = bytearray()
    errors = bytearray()
    finished = False

    def read(size: int) -> bytes:
        nonlocal finished
        while not finished:
            if len(pending) >= 8:
                length = int.from_bytes(pending[4:8], "big")
                if len(pending) >= 8 + length:
                    stream, payload = pending[0], bytes(pending[8 : 8 + length])
                    del pending[: 8 + length]
                    if stream == 2:
                        errors.extend(payload[: max(0, MAX_ERROR_BYTES - len(errors))])
                        continue
                    return payload
            data = read_socket(source, CHUNK)
            if not data:
                finished = True
            pending.extend(data)
        return b""

    def write(data: bytes) -> None:
        for target, _, sock in targets:
            try:
                sock.sendall(data)
            except OSError as exc:
                raise ForkCopyError(
                    f"extracting into {target[:12]} stopped taking data: {exc}"
                ) from exc

    sent = copy_checked(read, write, check)
    while not finished:  # the source's stderr, once its archive ended
        read(CHUNK)
    return sent, errors.decode(errors="replace").strip()


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


@dataclass(frozen=True)
class ForkEnd:
    """A supervised sandbox at one end of a copy."""

    name: str
    channel: SupervisorChannel
    control_dir: Path


async def copy_through_fifos(source: ForkEnd, targets: Sequence[ForkEnd], plan: CopyPlan) -> int:
    """Copy between supervised sandboxes (`plan.targets` unused); the bytes of the archive
    each got. Raises ForkCopyError (ArchiveRefused for a member no fork may get).

    Every tar ends on its own once the copy is over or broken: the source's at the end of
    its archive, or when the relay closes its FIFO; the targets' at the end of theirs. A
    relay that fails gives the tars EXIT_WAIT_S to end, then stops waiting for them."""
    if not plan.roots:
        return 0
    roots = " ".join(shlex.quote(root.lstrip("/")) for root in plan.roots)
    archive = ARCHIVE.format(excludes=_excludes(plan), blocking=PIPE_BLOCKING)
    archive = archive.replace('"$@"', roots)
    uid, gid = (int(part) for part in plan.user.split(":"))
    fifo = f"fork-{secrets.token_hex(8)}"
    paths = [source.control_dir / fifo, *(target.control_dir / fifo for target in targets)]
    unclaimed: set[int] = set()
    """Descriptors no task took over yet (each closes those it took)."""
    replies: dict[int, SupervisorReply | ChannelLost] = {}
    relayed: list[int | ForkCopyError] = []
    try:
        for path in paths:
            make_fifo(path, uid, gid)
        source_read = open_reading(paths[0])
        unclaimed.add(source_read)
        target_writes = []
        for path in paths[1:]:
            target_writes.append(open_writing_early(path))
            unclaimed.add(target_writes[-1])
            with contextlib.suppress(OSError):
                fcntl.fcntl(target_writes[-1], fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        abort_read, abort_write = os.pipe()
        unclaimed.add(abort_read)
        relay_ends = [source_read, *target_writes, abort_read]
        check = ArchiveCheck(plan.roots, plan.mounts)

        async def run(index: int, end: ForkEnd, command: str, writes: bool) -> None:
            message = RunMessage(
                id=end.channel.next_id(),
                command=command,
                env={},
                cwd="/",
                timeout_s=COPY_TIMEOUT_S,
                max_output_bytes=MAX_ERROR_BYTES,
                max_saved_output_bytes=0,
                fifo=fifo,
                fifo_write=writes,
                quiesce=writes,
            )
            deadline = COPY_TIMEOUT_S + supervisor.KILL_GRACE_S + REPLY_MARGIN_S
            replies[index] = await end.channel.run(message, deadline)

        def relay_on_thread() -> int:
            unclaimed.difference_update(relay_ends)
            return relay(source_read, target_writes, abort_read, check)

        async def relay_all(work: anyio.CancelScope) -> None:
            # WHY not abandoned on cancel: the thread closes the descriptors it was given, and
            # closing the abort pipe's other end (below) ends it at once.
            try:
                relayed.append(await anyio.to_thread.run_sync(relay_on_thread))
            except ForkCopyError as exc:
                relayed.append(exc)
                work.deadline = anyio.current_time() + EXIT_WAIT_S

        async def abort_when_done() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                os.close(abort_write)

        extract = f"exec {shlex.join(_extract(plan))} -B -xf - <&{PIPE}"
        async with anyio.create_task_group() as guard:
            guard.start_soon(abort_when_done)
            async with anyio.create_task_group() as work:
                work.start_soon(relay_all, work.cancel_scope)
                work.start_soon(run, -1, source, f"{archive} >&{PIPE}", True)
                for index, target in enumerate(targets):
                    work.start_soon(run, index, target, extract, False)
            guard.cancel_scope.cancel()
    finally:
        unlink(*paths)
        for fd in unclaimed:
            os.close(fd)
    if relayed and isinstance(relayed[0], _Stalled | ArchiveRefused):
        raise relayed[0]
    for index, target in enumerate(targets):
        problem = _failure(replies.get(index), strict=False)
        if problem:
            raise ForkCopyError(f"extracting into {target.name} failed: {problem}")
    problem = _failure(replies.get(-1), strict=True)
    if problem:
        raise ForkCopyError(f"archiving the source failed: {problem}")
    outcome = relayed[0] if relayed else ForkCopyError("the copy was stopped")
    if isinstance(outcome, ForkCopyError):
        raise outcome
    return outcome


def _failure(reply: SupervisorReply | ChannelLost | None, *, strict: bool) -> str | None:
    """Why a tar's run failed, or None (also when it has no reply: the copy failed before
    it ended); `strict`: anything it printed is a failure too."""
    if reply is None:
        return None
    if isinstance(reply, ChannelLost):
        return f"its sandbox stopped answering ({reply.reason})"
    if reply.error or reply.timed_out:
        return reply.error or f"it took over {COPY_TIMEOUT_S:.0f} s"
    if reply.exit_code != 0 or (strict and reply.stderr.strip()):
        status = reply.exit_code if reply.signal is None else f"signal {reply.signal}"
        return f"(status {status}): {reply.stderr.strip() or '-'}"
    return None


class _Reader:
    """What tarfile reads a stream from."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read = read


class _Writer:
    """What tarfile writes a stream to; counts what it was given. Once a write failed it takes
    nothing more: tarfile's close, on the way out of the failure, would write (and wait) again."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._failed = False
        self.sent = 0

    def write(self, data: bytes) -> int:
        if not self._failed:
            try:
                self._write(bytes(data))
            except BaseException:
                self._failed = True
                raise
            self.sent += len(data)
        return len(data)


def copy_checked(
    read: Callable[[int], bytes], write: Callable[[bytes], None], check: ArchiveCheck
) -> int:
    """Read an archive, check each member, write what a fork may get as a new archive; the
    bytes written. Raises ArchiveRefused, or ForkCopyError for an archive that is no tar."""
    sink = _Writer(write)
    try:
        with (
            tarfile.open(fileobj=cast(IO[bytes], _Reader(read)), mode="r|") as archive,
            tarfile.open(
                fileobj=cast(IO[bytes], sink), mode="w|", format=tarfile.PAX_FORMAT
            ) as copy,
        ):
            for member in archive:
                clean = check.accept(member)
                copy.addfile(clean, archive.extractfile(member) if member.isreg() else None)
    except tarfile.TarError as exc:
        raise ForkCopyError(f"the session's archive is no tar archive ({exc})") from exc
    return sink.sent


def relay(source: int, targets: Sequence[int], abort: int, check: ArchiveCheck) -> int:
    """Read the archive from `source`, check it and write what the forks may get into every
    one of `targets` (blocking: run it on a worker thread); the bytes each got. Takes every
    descriptor it is given and closes them; stops with ForkCopyError once `abort` is
    readable (its other end closed), or a target stopped taking data. Each chunk goes to
    the targets as each can take it: a slow one delays the next chunk, not the others'
    share of this one."""
    poller = select.poll()
    try:
        for fd in (source, *targets):
            os.set_blocking(fd, False)

        def read(size: int) -> bytes:
            while True:
                _wait(poller, {source: select.POLLIN}, abort)
                try:
                    return os.read(source, min(size, CHUNK))
                except BlockingIOError:
                    continue

        def write(chunk: bytes) -> None:
            views = {fd: memoryview(chunk) for fd in targets}
            while views:
                for fd, view in list(views.items()):
                    try:
                        written = os.write(fd, view)
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        raise ForkCopyError(
                            f"fork {targets.index(fd) + 1} stopped taking the copy"
                        ) from None
                    views[fd] = view = view[written:]
                    if not view:
                        del views[fd]
                if views:
                    _wait(poller, dict.fromkeys(views, select.POLLOUT), abort)

        sent = copy_checked(read, write, check)
        for fd in targets:
            _drain_fifo(fd, abort)
        return sent
    finally:
        for fd in (source, *targets, abort):
            os.close(fd)


DRAIN_STALL_S = 5.0
"""Once the copy is written, how long a target may take no byte of what is left in its FIFO
before its end is closed anyway (its tar died: its reply says why)."""


def _drain_fifo(fd: int, abort: int) -> None:
    """Until the target took all that is in its FIFO. WHY: the backend's end is the FIFO's
    only writer; closed before the target's tar opened it, the copy would be lost."""
    left = _queued(fd)
    stalled_since = time.monotonic()
    while left:
        ready, _, _ = select.select([abort], [], [], 0.005)
        if ready:
            raise ForkCopyError("the fork was stopped")
        now_left = _queued(fd)
        if now_left < left:
            left, stalled_since = now_left, time.monotonic()
        elif time.monotonic() - stalled_since > DRAIN_STALL_S:
            return


def _queued(fd: int) -> int:
    buffer = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buffer)
    return int.from_bytes(buffer, "little")


def _wait(poller: select.poll, fds: dict[int, int], abort: int) -> None:
    """Until one of `fds` is ready (or hung up: its read or write then says so)."""
    for fd, events in fds.items():
        poller.register(fd, events)
    poller.register(abort, select.POLLIN)
    try:
        ready = poller.poll(IO_TIMEOUT_S * 1000)
    finally:
        for fd in (*fds, abort):
            poller.unregister(fd)
    if not ready:
        raise _Stalled(f"the copy moved no byte for {IO_TIMEOUT_S:.0f} s")
    if any(fd == abort for fd, _ in ready):
        raise ForkCopyError("the fork was stopped")
