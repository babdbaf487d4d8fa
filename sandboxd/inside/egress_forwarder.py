"""Inside the container: relay 127.0.0.1:PORT to the daemon's egress proxy through FIFOs.

The sandbox has no network; HTTP_PROXY and its siblings point at this forwarder, which
copies bytes both ways to the daemon's proxy (sandboxd.egress.proxy), where every decision is made.
It decides nothing and trusts nothing: a command that kills it or talks to the backend itself
reaches only what the proxy allows.

For each connection it asks the backend, through the supervisor's channel, for a FIFO pair in
the control directory (`egress-N-up`, what the command sends; `egress-N-down`, what comes
back), opens both, and says so with one byte on `up` (the backend then unlinks them). WHY
FIFOs: the container's profile refuses Unix sockets to every process, this one included.

A thread of the supervisor with a selector: many connections cost no process against the
sandbox's pids limit.

Standard library only, and Python 3.8 syntax: it runs on whatever python3 the image has.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import selectors
import socket
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_CONNECTIONS = 256
"""Relayed connections at once, waiting ones included; more are closed at once (the proxy
bounds them too)."""
CHUNK = 256 * 1024
"""Read at once per connection and direction: large reads keep a download fast, and the
memory is the sandbox's own."""
OPENED = b"\0"
"""The first byte on `up`: both ends are open here (it is not passed on)."""


def fifo_names(number: int) -> tuple[str, str]:
    """(up, down) in the control directory, for connection `number`."""
    return f"egress-{number}-up", f"egress-{number}-down"


class Direction:
    """Bytes one way: read from `source` into `pending`, written to `sink`."""

    def __init__(self, source: int, sink: int) -> None:
        self.source = source
        self.sink = sink
        self.pending = b""
        self.ended = False
        """The source has no more (or the sink takes no more)."""
        self.closed = False
        """The sink has been told: nothing more comes."""


class Connection:
    """A command's TCP connection and its FIFO pair to the proxy."""

    def __init__(self, inner: socket.socket, up: int, down: int) -> None:
        self.inner = inner
        self.up = up
        self.down = down
        self.outward = Direction(inner.fileno(), up)
        self.inward = Direction(down, inner.fileno())

    def interest(self) -> dict[int, int]:
        wanted: dict[int, int] = {}
        for way in (self.outward, self.inward):
            if not way.pending and not way.ended:
                wanted[way.source] = wanted.get(way.source, 0) | selectors.EVENT_READ
            if way.pending and not way.closed:
                wanted[way.sink] = wanted.get(way.sink, 0) | selectors.EVENT_WRITE
        return wanted

    def done(self) -> bool:
        return all(way.ended and way.closed for way in (self.outward, self.inward))

    def read(self, way: Direction) -> None:
        try:
            data = os.read(way.source, CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""  # reset: its stream ends here
        if data:
            way.pending = data
        else:
            way.ended = True
            self.finish(way)

    def write(self, way: Direction) -> None:
        try:
            written = os.write(way.sink, way.pending)
        except BlockingIOError:
            return
        except OSError:  # it takes nothing more: drop what was for it, read no more
            way.pending = b""
            way.ended = True
            self.finish(way)
            return
        way.pending = way.pending[written:]
        if not way.pending and way.ended:
            self.finish(way)

    def finish(self, way: Direction) -> None:
        """Tell the sink nothing more comes, once what is pending is written."""
        if way.closed or way.pending:
            return
        way.closed = True
        if way is self.outward:
            with contextlib.suppress(OSError):
                os.close(self.up)
        else:
            with contextlib.suppress(OSError):
                self.inner.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.inner.close()
        for fd, way in ((self.up, self.outward), (self.down, None)):
            if way is None or not way.closed:
                with contextlib.suppress(OSError):
                    os.close(fd)


class Forwarder:
    def __init__(
        self, listener: socket.socket, control_dir: str, request: Callable[[int], None]
    ) -> None:
        self._listener = listener
        self._control_dir = control_dir
        self._request = request
        self._numbers = itertools.count(1)
        self._waiting: dict[int, socket.socket] = {}
        self._answers: queue.SimpleQueue[tuple[int, bool]] = queue.SimpleQueue()
        self._wake_read, self._wake_write = os.pipe()
        self._selector = selectors.DefaultSelector()
        self._watched: dict[int, int] = {}
        self._owners: dict[int, Connection] = {}

    def ready(self, number: int, ok: bool) -> None:
        """The backend's answer to a request (on the supervisor's thread)."""
        self._answers.put((number, ok))
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"!")

    def serve(self) -> None:
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        while True:
            for key, events in self._selector.select():
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    self._take_answers()
                else:
                    self._step(key.data, int(key.fd), events)

    def _accept(self) -> None:
        try:
            inner, _ = self._listener.accept()
        except OSError:
            return
        if len(self._waiting) + len(set(self._owners.values())) >= MAX_CONNECTIONS:
            inner.close()
            return
        number = next(self._numbers)
        self._waiting[number] = inner
        self._request(number)

    def _take_answers(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self._wake_read, 4096)
        while True:
            try:
                number, ok = self._answers.get_nowait()
            except queue.Empty:
                return
            inner = self._waiting.pop(number, None)
            if inner is None:
                continue
            connection = self._open(number, inner) if ok else None
            if connection is None:
                inner.close()
                continue
            self._update(connection)

    def _open(self, number: int, inner: socket.socket) -> Connection | None:
        up_name, down_name = fifo_names(number)
        try:
            down = os.open(os.path.join(self._control_dir, down_name), os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            up = os.open(os.path.join(self._control_dir, up_name), os.O_WRONLY | os.O_NONBLOCK)
            os.write(up, OPENED)
        except OSError:
            os.close(down)
            return None
        inner.setblocking(False)
        return Connection(inner, up, down)

    def _step(self, connection: Connection, fd: int, events: int) -> None:
        # WHY reads first, and a failed write only stops that direction: the proxy answers
        # a refusal and closes without reading the request, so the request's write fails
        # while the refusal still waits to be read and passed on.
        for way in (connection.outward, connection.inward):
            readable = events & selectors.EVENT_READ and fd == way.source
            if readable and not way.pending and not way.ended:
                connection.read(way)
        for way in (connection.outward, connection.inward):
            if events & selectors.EVENT_WRITE and fd == way.sink and way.pending:
                connection.write(way)
        self._update(connection)

    def _update(self, connection: Connection) -> None:
        wanted = {} if connection.done() else connection.interest()
        for fd in {connection.inner.fileno(), connection.up, connection.down}:
            events = wanted.get(fd, 0)
            # WHY unregister rather than wait on nothing: an end at end-of-file is always
            # readable, and waiting on it would spin.
            if fd in self._watched and self._owners.get(fd) is connection:
                if events:
                    self._selector.modify(fd, events, connection)
                    self._watched[fd] = events
                else:
                    self._selector.unregister(fd)
                    del self._watched[fd]
                    del self._owners[fd]
            elif events:
                self._selector.register(fd, events, connection)
                self._watched[fd] = events
                self._owners[fd] = connection
        if connection.done():
            connection.close()


def listen(port: int) -> socket.socket | str:
    """Listen on 127.0.0.1:`port`; the socket, or why it could not (for the supervisor's
    hello: a port already taken is reported rather than lost)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        listener.setblocking(False)
    except OSError as exc:
        listener.close()
        return f"cannot listen on 127.0.0.1:{port}: {exc}"
    return listener


def start(
    listener: socket.socket, control_dir: str, request: Callable[[int], None]
) -> Callable[[int, bool], None]:
    """Relay on a thread of its own; returns where the backend's answers go."""
    forwarder = Forwarder(listener, control_dir, request)
    threading.Thread(target=forwarder.serve, name="egress", daemon=True).start()
    return forwarder.ready


if __name__ == "__main__":  # pragma: no cover
    sys.exit("started by the sandbox supervisor")
