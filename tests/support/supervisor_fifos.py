"""The backend's end of a supervisor's two FIFOs, for tests that run the supervisor on this
host: made, opened and handed over by the backend's own code (sandboxd.docker.backend's
ChannelFifos), the supervisor started on them as a container starts it
(`python3 -E -s -S supervisor.py CONTROL_DIR SAVED_OUTPUT_DIR`).

Two ends: `supervised`, the channel the backend serves (SupervisorChannel); `RawFifos`, the
same FIFOs byte by byte, blocking, for tests that send what the real client never would.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from sandboxd.docker.container import PYTHON_FLAGS, install_supervisor
from sandboxd.docker.fifo import FifoPair, unlink
from sandboxd.docker.supervisor_client import ChannelFifos, SupervisorChannel, SupervisorHello
from sandboxd.inside.supervisor import IN_FIFO, OUT_FIFO

START_TIMEOUT_S = 20.0
IO_TIMEOUT_S = 20.0


def control_dir(tmp_path: Path, orphan_ttl_s: float = 0.0) -> tuple[Path, Path]:
    """A control directory with the supervisor in it (as a container mounts it), and the
    script; `orphan_ttl_s`: how long it waits for a daemon once the backend hung up."""
    control = tmp_path / "control"
    control.mkdir()
    return control, install_supervisor(control, orphan_ttl_s=orphan_ttl_s)


def make_fifos(control: Path) -> ChannelFifos:
    """The backend's `in` and `out`, made and opened as for a container."""
    return ChannelFifos.make(control, os.getuid(), os.getgid())


def supervisor_argv(script: Path, control: Path, output_dir: Path) -> list[str]:
    return [sys.executable, *PYTHON_FLAGS, str(script), str(control), str(output_dir)]


@dataclass
class Supervised:
    channel: SupervisorChannel
    hello: SupervisorHello
    process: anyio.abc.Process
    control: Path


@contextlib.asynccontextmanager
async def supervised(
    tmp_path: Path, output_dir: Path, orphan_ttl_s: float = 0.0
) -> AsyncIterator[Supervised]:
    """A supervisor on this host and the backend's channel to it (not served yet). The
    process is killed (if still running) and reaped on the way out."""
    control, script = control_dir(tmp_path, orphan_ttl_s)
    fifos = make_fifos(control)
    try:
        process = await anyio.open_process(
            supervisor_argv(script, control, output_dir),
            stdin=subprocess.DEVNULL,
            stdout=None,
            stderr=None,
        )
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                channel, hello = await fifos.handshake()
            yield Supervised(channel, hello, process, control)
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()
            await process.aclose()
    finally:
        await fifos.aclose()  # what the handshake did not take over (nothing once it succeeded)


class RawFifos:
    """The backend's end of the supervisor's FIFOs, blocking, with a timeout on every wait:
    the same steps as ChannelFifos.handshake (the hello read, the FIFOs unlinked, the early
    writing end reopened write-only), without a SupervisorChannel."""

    def __init__(self, pair: FifoPair, timeout_s: float = IO_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._pending = bytearray()
        self._heard = False
        replies = pair.stream.reading_fd
        assert replies is not None
        self.replies = replies
        self.requests = -1
        self.hello = self.readline()
        pair.settle()  # as the backend does once it has the hello
        replies, requests = pair.stream.detach()  # ours now
        assert replies is not None and requests is not None
        self.replies, self.requests = replies, requests

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.requests, view) :]
            except BlockingIOError:
                self._wait(self.requests, select.POLLOUT)

    def readline(self) -> bytes:
        while (end := self._pending.find(b"\n")) < 0:
            self._fill()
        line = bytes(self._pending[: end + 1])
        del self._pending[: end + 1]
        return line

    def read(self, size: int) -> bytes:
        while len(self._pending) < size:
            self._fill()
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def _fill(self) -> None:
        if not self._heard:
            # WHY wait first: until the supervisor opened its end, a read says "ended".
            self._wait(self.replies, select.POLLIN)
        while True:
            try:
                data = os.read(self.replies, 65536)
            except BlockingIOError:
                self._wait(self.replies, select.POLLIN)
                continue
            if not data:
                raise EOFError("the supervisor closed its end")
            self._pending += data
            self._heard = True
            return

    def _wait(self, fd: int, events: int) -> None:
        poller = select.poll()
        poller.register(fd, events)
        if not poller.poll(self._timeout_s * 1000):
            raise TimeoutError(f"the supervisor's FIFO did not move for {self._timeout_s} s")

    def hang_up(self) -> None:
        """Close the requests' end: the supervisor reads its end and stops."""
        if self.requests >= 0:
            os.close(self.requests)
            self.requests = -1

    def close(self) -> None:
        self.hang_up()
        if self.replies >= 0:
            os.close(self.replies)
            self.replies = -1


@contextlib.contextmanager
def raw_supervisor(tmp_path: Path) -> Iterator[tuple[RawFifos, subprocess.Popen[bytes], Path]]:
    """A supervisor on this host, its FIFOs byte by byte, and its control directory."""
    control, script = control_dir(tmp_path)
    pair = FifoPair.make(control / OUT_FIFO, control / IN_FIFO, os.getuid(), os.getgid())
    try:
        process = subprocess.Popen(
            supervisor_argv(script, control, tmp_path / "out"), stdin=subprocess.DEVNULL
        )
        try:
            raw = RawFifos(pair)
            try:
                yield raw, process, control
            finally:
                raw.close()
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    finally:
        unlink(*pair.paths)
        for fd in pair.stream.detach():
            if fd is not None:
                os.close(fd)
