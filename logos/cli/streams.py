"""Output that outlives its reader: a pipe closed early, a terminal that hung up.

WHY: `logos --json "task" | head -1` closes stdout while the run goes on, and a closed
terminal fails every write (EIO) while its SIGHUP is being handled. A write that raises
would end the run mid-step: a traceback, exit status 1 (which means "a limit stopped the
run") and a trajectory without its `done` record. A guarded descriptor instead reports the
loss once and sends everything after it, buffered bytes included, to /dev/null.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class GuardedOutput(io.RawIOBase):
    """A write-only view of a descriptor (not closed with it) whose write errors are lost.

    `lost` is the first error; `on_lost`, when set, hears about it once, from the thread
    that wrote.
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.lost: OSError | None = None
        self.on_lost: Callable[[OSError], None] | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return self.lost is None and os.isatty(self._fd)

    def write(self, data: ReadableBuffer) -> int:
        size = memoryview(data).nbytes
        if self.lost is not None:
            return size
        try:
            return os.write(self._fd, data)
        except OSError as exc:
            self._lose(exc)
            return size

    def _lose(self, exc: OSError) -> None:
        self.lost = exc
        # WHY dup2 rather than just dropping: the descriptor is shared (sys.stdout, the
        # interpreter's exit flush); pointed at /dev/null, none of them can fail again.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            os.dup2(devnull, self._fd)
            os.close(devnull)
        if self.on_lost is not None:
            self.on_lost(exc)


def guarded_text(
    stream: TextIO, fd: int | None = None, encoding: str | None = None
) -> tuple[TextIO, GuardedOutput]:
    """A text stream writing to `fd` (default: `stream`'s), encoded as `stream` is unless
    `encoding` says otherwise; a character the encoding lacks is replaced, never an error."""
    raw = GuardedOutput(stream.fileno() if fd is None else fd)
    errors = stream.errors if stream.errors not in (None, "strict") else "replace"
    text = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=encoding or stream.encoding or "utf-8",
        errors=errors,
        line_buffering=True,
        write_through=True,
    )
    return text, raw
