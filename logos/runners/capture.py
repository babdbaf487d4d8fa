"""Bounded capture of a command's output: keep the head and the tail, count the middle;
and the loop that reads a process's pipes into its captures (`read_process_output`).

Standard library only, and Python 3.8 syntax: the sandbox supervisor runs this same file
inside containers, where the backend stages it read-only beside the supervisor (see
sandboxd.docker.container). WHY the read loop lives here rather than in a module of its own:
the local runner and the supervisor share it, and this is already the one logos file a
container holds, so sharing it adds no file to the control directory and no module to what
sandboxd may import.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import stat
import time
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # WHY not `typing`: the supervisor imports only what it runs
    import subprocess
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from typing import Literal

    StreamName = Literal["stdout", "stderr"]

_OMISSION_MARKER = "\n[… {dropped} bytes omitted …]\n"
_UNSAVED_MARKER = "\n[… {dropped} bytes omitted; no copy was saved: {reason} …]\n"
"""The omission marker when a copy was wanted but could not be saved (and why)."""
SAVE_LIMIT_NOTE = (
    "\n[… {unsaved} more bytes were not saved: this copy holds only the first {saved} bytes …]\n"
)
"""Ends a saved copy that the save limit cut short, where `tail` of the file will show it."""
_LINE_TRIM_DIVISOR = 4
"""A cut moves to a line boundary only if that gives up at most 1/4 of the kept bytes."""


class UntrustedDirectory(Exception):
    """The saved-output directory cannot be trusted with a command's output; says why."""


def private_output_dir(parent: str) -> str:
    """This user's directory for saved outputs under `parent` (a temp dir shared with others).

    WHY one fixed directory per user rather than a fresh `mkdtemp` per runner: runners are
    cheap and many, and empty temporary directories would pile up. The fixed name can be
    planted by someone else, which `open_private_dir` refuses.
    """
    return os.path.join(parent, f"logos-output-{os.geteuid()}")


def open_private_dir(path: str) -> int:
    """Open `path`, creating it 0700 if missing, as a directory only this user can enter.

    Returns a descriptor to create files relative to (`dir_fd=`): a rename of the directory
    after the checks cannot redirect them. Raises UntrustedDirectory when `path` is a symlink,
    not a directory, someone else's, open to group or others, or a mount point (in a sandbox:
    a host directory mounted over the name).

    WHY each step: the name lives in a shared temp dir where anyone may plant it first. mkdir
    never follows a symlink; O_NOFOLLOW refuses one planted in its place; fstat checks the
    very directory that was opened, not whatever the name leads to a moment later.
    """
    parent, name = os.path.split(path)
    try:
        parent_fd = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise UntrustedDirectory(f"cannot open {parent}: {exc.strerror}") from None
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UntrustedDirectory(f"cannot create {path}: {exc.strerror}") from None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UntrustedDirectory(f"{path} is not a directory (a symlink?)") from None
            raise UntrustedDirectory(f"cannot open {path}: {exc.strerror}") from None
        problem = _untrusted_because(path, os.fstat(fd), os.fstat(parent_fd))
        if problem is not None:
            os.close(fd)
            raise UntrustedDirectory(problem)
        return fd
    finally:
        os.close(parent_fd)


def _untrusted_because(path: str, info: os.stat_result, parent: os.stat_result) -> str | None:
    if info.st_uid != os.geteuid():
        return f"{path} belongs to uid {info.st_uid}, not to uid {os.geteuid()}"
    if info.st_mode & 0o077:
        return f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o})"
    if info.st_dev != parent.st_dev:
        return f"{path} is a mount point (a directory from elsewhere)"
    return None


@dataclass(frozen=True)
class CapturedOutput:
    text: str
    """Head and tail decoded as UTF-8, with an omission marker between them when cut."""
    total_bytes: int
    dropped_bytes: int
    saved_path: str | None = None
    """A file holding the output when it was cut (up to `saved_bytes` of it)."""
    saved_bytes: int = 0


class OutputCapture:
    """Collects one stream with memory bounded by `limit`, whatever the command writes.

    The first half of `limit` is the head, the rest the tail. When the output outgrows
    `limit` and `save_path` is given, everything (up to `save_limit` bytes) is written to
    that new file so that the model can read the full output with a further command. The
    file's directory must be a private directory of this user (see `open_private_dir`);
    when it is not, nothing is saved and the omission marker says why.
    """

    def __init__(self, limit: int, save_path: str | None = None, save_limit: int = 0) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._save_path = save_path if save_limit > 0 else None
        self._save_limit = save_limit
        self._dir_fd: int | None = None
        self._save_fd: int | None = None
        self._saved = 0
        self._unsaved_reason: str | None = None
        self._whole = False
        """Saving the whole output, cut or not (`save_whole`): the copy is always reported."""

    @property
    def total_bytes(self) -> int:
        return self._total

    def save_whole(self) -> None:
        """Save the whole output from now on, whether or not it is ever cut.

        WHY: a command that goes on as a job shows its output so far once; the rest reaches
        the model through the copy. Nothing was dropped before a copy would have started (a
        copy starts before the first cut), so the copy holds the output from its first byte.
        """
        self._whole = True
        if self._save_path is not None and self._save_fd is None:
            self._start_saving()

    @property
    def saved_path(self) -> str | None:
        """The copy being written, if there is one."""
        return self._save_path if self._save_fd is not None else None

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._total += len(data)
        if self._save_fd is not None:
            self._save(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
            if not data:
                return
        self._tail += data
        if len(self._tail) > self._tail_limit:
            if self._save_path is not None and self._save_fd is None:
                self._start_saving()
            if len(self._tail) > 2 * self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    def _start_saving(self) -> None:
        """Called once, when the output first outgrows the limit: nothing was dropped yet."""
        assert self._save_path is not None
        directory, name = os.path.split(self._save_path)
        try:
            self._dir_fd = open_private_dir(directory)
            self._save_fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                0o600,
                dir_fd=self._dir_fd,
            )
        except UntrustedDirectory as refusal:
            self._stop_saving(str(refusal))
            return
        except OSError as exc:
            self._stop_saving(f"cannot create {self._save_path}: {exc.strerror}")
            return
        self._save(bytes(self._head) + bytes(self._tail))

    def _save(self, data: bytes) -> None:
        chunk = data[: max(0, self._save_limit - self._saved)]
        if self._write_all(chunk):
            self._saved += len(chunk)

    def _write_all(self, data: bytes) -> bool:
        """Append `data` to the copy; on failure the copy is abandoned and False returned."""
        assert self._save_fd is not None
        rest = memoryview(data)
        try:
            while rest:
                rest = rest[os.write(self._save_fd, rest) :]
        except OSError as exc:
            self._abandon_save(f"writing {self._save_path} failed: {exc.strerror}")
            return False
        return True

    def _abandon_save(self, reason: str) -> None:
        """Stop saving after a failed write (e.g. a full disk); the copy is then not reported.

        WHY truncate: a copy with a hole would claim to hold output it lost, and on a full
        disk the space is better given back to the commands that follow.
        """
        assert self._save_fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._save_fd, 0)
        self._stop_saving(reason)

    def _stop_saving(self, reason: str | None) -> None:
        """Close what saving opened; `reason` (if any) is why no copy is reported."""
        for fd in (self._save_fd, self._dir_fd):
            if fd is not None:
                os.close(fd)
        self._save_fd = self._dir_fd = None
        self._save_path = None
        self._saved = 0
        self._unsaved_reason = reason

    def discard(self) -> None:
        """Close and delete the saved copy: for a command whose result nobody will read."""
        if self._save_fd is not None and self._save_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(os.path.basename(self._save_path), dir_fd=self._dir_fd)
        self._stop_saving(None)

    def snapshot(self, skip: int = 0) -> CapturedOutput:
        """What was captured so far, the copy left open; see `finish` for `skip`."""
        return self._captured(skip)

    def finish(self, skip: int = 0) -> CapturedOutput:
        """Close the saved file and decode what was kept.

        `skip`: leave out the output's first `skip` bytes, which the reader has seen already
        (a job's end shows only what came after its output so far).
        """
        if self._save_fd is not None:
            unsaved = self._total - self._saved
            if unsaved:
                self._write_all(SAVE_LIMIT_NOTE.format(unsaved=unsaved, saved=self._saved).encode())
        captured = self._captured(skip)
        if self._save_fd is not None:
            self._stop_saving(None)
        return captured

    def _captured(self, skip: int) -> CapturedOutput:
        total = self._total
        skip = min(max(skip, 0), total)
        tail = self._tail[-self._tail_limit :] if self._tail_limit else bytearray()
        tail_start = total - len(tail)
        head = self._head[skip:]
        tail = tail[max(skip - tail_start, 0) :]
        gap = tail_start - max(skip, len(self._head))
        saved_path = self._save_path if self._save_fd is not None else None
        if gap <= 0:
            kept = bytes(head) + bytes(tail)
            text = kept[_leading_continuations(bytearray(kept)) if skip else 0 :].decode(
                "utf-8", errors="replace"
            )
            return CapturedOutput(
                text=text,
                total_bytes=total,
                dropped_bytes=0,
                saved_path=saved_path if self._whole else None,
                saved_bytes=self._saved if self._whole else 0,
            )
        head = head[_leading_continuations(head) if skip else 0 :]
        head_bytes = bytes(head[: _back_to_line_end(head, _complete_prefix(head))])
        tail_bytes = bytes(tail[_on_to_line_start(tail, _leading_continuations(tail)) :])
        dropped = total - skip - len(head_bytes) - len(tail_bytes)
        if self._unsaved_reason is None:
            marker = _OMISSION_MARKER.format(dropped=dropped)
        else:
            marker = _UNSAVED_MARKER.format(dropped=dropped, reason=self._unsaved_reason)
        if not head_bytes or head_bytes.endswith(b"\n"):
            marker = marker[1:]
        text = (
            head_bytes.decode("utf-8", errors="replace")
            + marker
            + tail_bytes.decode("utf-8", errors="replace")
        )
        return CapturedOutput(
            text=text,
            total_bytes=total,
            dropped_bytes=dropped,
            saved_path=saved_path if self._saved or self._whole else None,
            saved_bytes=self._saved,
        )


def _back_to_line_end(data: bytearray, end: int) -> int:
    """Where the head should end: after its last whole line, unless that drops more than a
    quarter of it. WHY: a line cut in two ("996" for "199996") reads as a real line."""
    newline = data.rfind(b"\n", 0, end)
    if newline >= 0 and end - (newline + 1) <= end // _LINE_TRIM_DIVISOR:
        return newline + 1
    return end


def _on_to_line_start(data: bytearray, start: int) -> int:
    """Where the tail should start: at its first whole line, within the same bound."""
    newline = data.find(b"\n", start)
    if newline >= 0 and newline + 1 - start <= (len(data) - start) // _LINE_TRIM_DIVISOR:
        return newline + 1
    return start


def _complete_prefix(data: bytearray) -> int:
    """Length of `data` without a trailing, incomplete UTF-8 sequence."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80:
            return end
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return end if back >= need else end - back
    return end


def _leading_continuations(data: bytearray) -> int:
    """How many UTF-8 continuation bytes open `data` (the rest of a character cut in two)."""
    count = 0
    while count < min(3, len(data)) and 0x80 <= data[count] < 0xC0:
        count += 1
    return count


_READ_CHUNK = 64 * 1024


def read_process_output(
    process: subprocess.Popen[bytes],
    stdout: OutputCapture,
    stderr: OutputCapture,
    tend: Callable[[float, bool], float | None],
    *,
    drain_s: float,
    poll_s: float,
    wake_fd: int | None = None,
    write_lock: AbstractContextManager[object] | None = None,
    on_chunk: Callable[[StreamName, bytes], None] | None = None,
) -> None:
    """Read the process's stdout and stderr into their captures until it has exited and the
    pipes are drained, then close them; a background process holding them open gets `drain_s`.

    `tend(now, exited)` is the caller's policy (deadlines, signals, handing over as a job),
    called on every turn: it returns the longest wait before it must be called again, or None
    when it waits for nothing. Once the process has exited, None also means the caller is done
    with it: the pipes are drained and the loop ends. `wake_fd` is readable when another thread
    wants `tend` called now (its bytes are consumed); `write_lock` is held while a chunk goes
    into a capture that another thread reads. `on_chunk(stream, data)` hears each chunk as it
    is read (`stream` is "stdout" or "stderr"): for someone watching the command live. Without
    a pidfd (Linux before 5.3), the exit is polled every `poll_s`.
    """
    assert process.stdout is not None and process.stderr is not None
    streams = {process.stdout.fileno(): stdout, process.stderr.fileno(): stderr}
    names: dict[int, StreamName] = {
        process.stdout.fileno(): "stdout",
        process.stderr.fileno(): "stderr",
    }
    selector = selectors.DefaultSelector()
    for fd in (*streams, *(() if wake_fd is None else (wake_fd,))):
        selector.register(fd, selectors.EVENT_READ)
    exit_fd = _open_pidfd(process.pid)
    if exit_fd is not None:
        selector.register(exit_fd, selectors.EVENT_READ)
    lock = contextlib.nullcontext() if write_lock is None else write_lock
    done_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            exited = process.poll() is not None
            wait = tend(now, exited)
            if exited and wait is None:
                done_at = now if done_at is None else done_at
                if not streams or now >= done_at + drain_s:
                    return
                wait = done_at + drain_s - now
            elif not exited and exit_fd is None:
                wait = poll_s if wait is None else min(wait, poll_s)
            for key, _ in selector.select(wait):
                if key.fd == wake_fd:
                    os.read(wake_fd, 64)
                elif key.fd == exit_fd:
                    selector.unregister(exit_fd)  # stays readable: poll() takes over
                else:
                    chunk = os.read(key.fd, _READ_CHUNK)
                    if chunk:
                        with lock:
                            streams[key.fd].write(chunk)
                        if on_chunk is not None:
                            on_chunk(names[key.fd], chunk)
                    else:
                        selector.unregister(key.fd)
                        del streams[key.fd]
    finally:
        selector.close()
        process.stdout.close()
        process.stderr.close()
        if exit_fd is not None:
            os.close(exit_fd)


def _open_pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when the process exits (Linux 5.3+)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
