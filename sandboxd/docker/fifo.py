"""The host's end of the FIFOs a sandbox talks through: its supervisor's channel and each
connection of its egress.

WHY FIFOs rather than a Unix socket: the container's seccomp profile refuses Unix sockets to
every process in it, the supervisor included (sandboxd.docker.seccomp), and a FIFO in the
read-only control directory needs none: opening one for writing is no write to its file
system. The host makes each FIFO in the control directory and opens its own end first, so the
sandbox's open never blocks, then unlinks the FIFO once both ends are open: from then on no
process can open it again, and the two ends lead only to each other.

A FIFO the host writes into is first opened read-write (Linux lets a FIFO be opened so,
without waiting for a reader); once the sandbox holds its reading end, `_reopen_writing`
makes it write-only, so that a write to a reader that is gone fails (EPIPE) instead of
filling the pipe for ever.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

CHUNK = 256 * 1024


def _make_fifo(path: Path, uid: int, gid: int) -> None:
    """A FIFO only the sandbox's uid (and the host) may open: 0600 and its own, or, for a
    daemon that cannot give a file away, 0666 inside the daemon's 0700 state directory (the
    only way to it from the host; the read-only mount the only one inside)."""
    os.mkfifo(path, 0o600)
    try:
        os.chown(path, uid, gid)
    except PermissionError:
        if os.getuid() != uid:
            path.chmod(0o666)


def _open_reading(path: Path) -> int:
    """The host's reading end (never blocks: a FIFO opened so waits for no writer)."""
    return _open(path, os.O_RDONLY)


def _open_writing_early(path: Path) -> int:
    """The host's writing end before the sandbox opened its reading one (see the docstring)."""
    return _open(path, os.O_RDWR)


def _reopen_writing(early: int) -> int:
    """The host's writing end once the sandbox reads, from the early one (the FIFO may be
    unlinked by then): write-only, so a gone reader is an error. Raises OSError (ENXIO) when
    nobody reads it."""
    return _open(Path(f"/proc/self/fd/{early}"), os.O_WRONLY, follow=True)


def _open(path: Path, flags: int, *, follow: bool = False) -> int:
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a FIFO")
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlink(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class FifoStream(anyio.abc.ByteStream):
    """A byte stream over two descriptors: what the sandbox writes (`reading`) and what it
    reads (`writing`), either may be None (a one-way FIFO). Non-blocking, on the event loop."""

    def __init__(self, reading: int | None, writing: int | None) -> None:
        self._reading = reading
        self._writing = writing
        for fd in (reading, writing):
            if fd is not None:
                os.set_blocking(fd, False)
        self._send_lock = anyio.Lock()
        self._heard = False
        """Something was read: the writer had opened, so an empty read is its end. Before,
        an empty read only means it has not opened yet (a FIFO then reads as ended)."""

    @property
    def reading_fd(self) -> int | None:
        return self._reading

    @property
    def writing_fd(self) -> int | None:
        return self._writing

    def detach(self) -> tuple[int | None, int | None]:
        """Hand the two descriptors over (reading, writing): the stream no longer owns them."""
        ends = (self._reading, self._writing)
        self._reading = self._writing = None
        return ends

    def replace_writing(self, fd: int) -> None:
        """Write through `fd` from now on (see reopen_writing); the old end is closed."""
        old, self._writing = self._writing, fd
        os.set_blocking(fd, False)
        if old is not None:
            self._close(old)

    async def wait_heard(self) -> None:
        """Until the sandbox's end has written (or opened and closed) its FIFO."""
        if self._reading is not None:
            await anyio.wait_readable(self._reading)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._reading is None:
            raise anyio.ClosedResourceError
        if not self._heard:
            # WHY wait first: until a writer opened, a read says "ended"; poll does not (it
            # reports a hang-up only once a writer came and went).
            await anyio.wait_readable(self._reading)
        while True:
            try:
                data = os.read(self._reading, min(max_bytes, CHUNK))
            except BlockingIOError:
                await anyio.wait_readable(self._reading)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            self._heard = True
            return data

    async def send(self, item: bytes) -> None:
        async with self._send_lock:
            view = memoryview(item)
            while view:
                if self._writing is None:
                    raise anyio.ClosedResourceError
                try:
                    written = os.write(self._writing, view)
                except BlockingIOError:
                    await anyio.wait_writable(self._writing)
                    continue
                except OSError as exc:
                    raise anyio.BrokenResourceError from exc
                view = view[written:]

    async def send_eof(self) -> None:
        if self._writing is not None:
            fd, self._writing = self._writing, None
            self._close(fd)

    async def aclose(self) -> None:
        for fd in (self._reading, self._writing):
            if fd is not None:
                self._close(fd)
        self._reading = self._writing = None

    @staticmethod
    def _close(fd: int) -> None:
        # Outside an event loop (a blocking caller settling a pair) nothing waits on it.
        with contextlib.suppress(anyio.NoEventLoopError):
            anyio.notify_closing(fd)
        with contextlib.suppress(OSError):
            os.close(fd)


@dataclass
class FifoPair:
    """A two-way channel to a sandbox: a FIFO it writes (`reading` here) and one it reads
    (`writing` here), made in its control directory, the host's ends open before the
    sandbox opens its own. `settle` once it has both open."""

    paths: tuple[Path, Path]
    stream: FifoStream

    @classmethod
    def make(cls, reading: Path, writing: Path, uid: int, gid: int) -> FifoPair:
        made: list[Path] = []
        try:
            for path in (reading, writing):
                _make_fifo(path, uid, gid)
                made.append(path)
            read_fd = _open_reading(reading)
            try:
                write_fd = _open_writing_early(writing)
            except BaseException:
                os.close(read_fd)
                raise
        except BaseException:
            unlink(*made)
            raise
        return cls((reading, writing), FifoStream(read_fd, write_fd))

    def settle(self) -> None:
        """The sandbox holds both ends: no process may open the FIFOs again, and a write to
        an end it closed fails (see reopen_writing). Raises OSError when it does not read."""
        unlink(*self.paths)
        early = self.stream.writing_fd
        if early is None:
            raise OSError(errno.EPIPE, "the channel's writing end is closed")
        self.stream.replace_writing(_reopen_writing(early))

    async def aclose(self) -> None:
        unlink(*self.paths)
        await self.stream.aclose()
