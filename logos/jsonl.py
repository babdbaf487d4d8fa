"""Private files: append-only JSON lines, how a run's records (a trajectory, an audit log)
are written, and small files replaced whole (the memory notes).

They hold commands and their output, which may include secrets, so directories are
created 0700 and files 0600. Each record is one write() of one whole line; a replaced file
is written beside the old one and renamed over it, so a reader never sees half of it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
from pathlib import Path
from typing import Self

from logos.access.private_dirs import make_private_dirs
from logos.errors import RecordFileError


def make_private_dir(path: Path) -> None:
    """`make_private_dirs(path)` (each missing directory 0700); RecordFileError if it fails."""
    try:
        make_private_dirs(path)
    except OSError as exc:
        raise RecordFileError(
            f"cannot create {path}: {exc.strerror}: make it writable, or set XDG_STATE_HOME "
            "to a writable directory"
        ) from None


def open_private_append(path: Path, *, exclusive: bool = False) -> int:
    """A file descriptor appending to `path` (created 0600); `exclusive`: it must be new.

    WHY O_APPEND on a raw descriptor: each record is one write() of one whole line, so a
    crash can at worst leave a truncated last line, never interleave two records.
    """
    make_private_dir(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    if exclusive:
        flags |= os.O_EXCL
    try:
        return os.open(path, flags, 0o600)
    except FileExistsError:
        raise  # the caller asked for a new file and picks another name
    except OSError as exc:
        raise RecordFileError(
            f"cannot write {path}: {exc.strerror}: check its permissions"
        ) from None


def write_line(fd: int, line: str) -> None:
    """Append one record: a single write of the line and its newline."""
    data = (line + "\n").encode("utf-8")
    written = os.write(fd, data)
    while written < len(data):  # a short write only happens on a full disk or a signal
        written += os.write(fd, data[written:])


def replace_private_file(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to a new 0600 file beside `path`, then rename it over `path`:
    never half a file, even for a reader or a crash in the middle."""
    make_private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class JsonLinesFile:
    """An append-only JSON-lines file on a raw descriptor: one write() per record."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def write_line(self, line: str) -> None:
        write_line(self._fd, line)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def utc_now() -> str:
    """The records' timestamp: UTC, ISO 8601, milliseconds, `Z`."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
