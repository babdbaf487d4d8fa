"""Inside the container: relay 127.0.0.1:PORT to the egress proxy's Unix socket.

The sandbox has no network; HTTP_PROXY and its siblings point at this forwarder, which
copies bytes both ways to the daemon's proxy (sandboxd.egress), where every decision is made.
It decides nothing and trusts nothing: a command that kills it or talks to the proxy's socket
directly reaches only what the proxy allows.

The supervisor forks it before it denies Unix sockets to itself and its commands (the
forwarder needs them for each connection). One thread with a selector, so that many
connections cost no processes against the sandbox's pids limit.

Standard library only, and Python 3.8 syntax: it runs on whatever python3 the image has.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import sys

MAX_CONNECTIONS = 256
"""Relayed connections at once; more are closed at once (the proxy bounds them too)."""
CHUNK = 256 * 1024
"""Read at once per connection and direction: large reads keep a download fast, and the
memory is the sandbox's own."""


class Pair:
    """One relayed connection: the command's TCP socket and the proxy's Unix socket, each
    with what it has read and the other has not yet taken."""

    def __init__(self, inner: socket.socket, outer: socket.socket) -> None:
        self.ends = (inner, outer)
        self.pending = {inner: b"", outer: b""}
        self.shut = {inner: False, outer: False}
        self.watched = set()  # type: set[socket.socket]


def other(pair: Pair, end: socket.socket) -> socket.socket:
    return pair.ends[1] if end is pair.ends[0] else pair.ends[0]


def serve(listener: socket.socket, proxy_path: str) -> None:
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    pairs = {}  # type: dict[socket.socket, Pair]

    def close(pair: Pair) -> None:
        for end in pair.ends:
            pairs.pop(end, None)
            if end in pair.watched:
                selector.unregister(end)
            end.close()

    def update(pair: Pair) -> None:
        if all(pair.shut.values()) and not any(pair.pending.values()):
            close(pair)
            return
        for end in pair.ends:
            events = 0
            if not pair.pending[end] and not pair.shut[end]:
                events |= selectors.EVENT_READ
            if pair.pending[other(pair, end)]:
                events |= selectors.EVENT_WRITE
            # WHY unregister rather than wait on nothing: a socket at end-of-file is always
            # readable, and waiting on it would spin.
            registered = end in pair.watched
            if events and registered:
                selector.modify(end, events, pair)
            elif events:
                selector.register(end, events, pair)
                pair.watched.add(end)
            elif registered:
                selector.unregister(end)
                pair.watched.discard(end)

    while True:
        for key, events in selector.select():
            if key.data is None:
                accept(listener, proxy_path, pairs, selector)
                continue
            end = key.fileobj
            assert isinstance(end, socket.socket)
            pair = key.data
            if end not in pairs:
                continue
            peer = other(pair, end)
            # WHY reads first, and a failed write only stops that direction: the proxy answers
            # a refusal and closes without reading the request, so the request's write fails
            # while the refusal still waits to be read and passed on.
            if events & selectors.EVENT_READ and not pair.pending[end] and not pair.shut[end]:
                try:
                    data = end.recv(CHUNK)
                except OSError:
                    data = b""  # reset: its stream ends here
                if data:
                    pair.pending[end] = data
                else:
                    pair.shut[end] = True
                    half_close(peer)
            if events & selectors.EVENT_WRITE and pair.pending[peer]:
                try:
                    sent = end.send(pair.pending[peer])
                    pair.pending[peer] = pair.pending[peer][sent:]
                except OSError:  # it takes nothing more: drop what was for it, read no more
                    pair.pending[peer] = b""
                    pair.shut[peer] = True
                if not pair.pending[peer] and pair.shut[peer]:
                    half_close(end)
            update(pair)


def half_close(end: socket.socket) -> None:
    """No more bytes to send it (a peer that is gone is no error)."""
    with contextlib.suppress(OSError):
        end.shutdown(socket.SHUT_WR)


def accept(
    listener: socket.socket,
    proxy_path: str,
    pairs: dict[socket.socket, Pair],
    selector: selectors.BaseSelector,
) -> None:
    try:
        inner, _ = listener.accept()
    except OSError:
        return
    if len(pairs) >= 2 * MAX_CONNECTIONS:
        inner.close()
        return
    outer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        outer.connect(proxy_path)
    except OSError:
        inner.close()
        outer.close()
        return
    pair = Pair(inner, outer)
    for end in pair.ends:
        end.setblocking(False)
        pairs[end] = pair
        selector.register(end, selectors.EVENT_READ, pair)
        pair.watched.add(end)


def start(proxy_path: str, port: int) -> str | None:
    """Listen on 127.0.0.1:`port` and fork the relay; None, or why it could not start.

    WHY the parent binds: a port already taken is reported in the supervisor's hello rather
    than lost in a child's stderr."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        return f"cannot listen on 127.0.0.1:{port}: {exc}"
    child = os.fork()
    if child:
        listener.close()
        return None
    try:  # pragma: no cover - runs in the forked child
        os.setsid()
        # The supervisor's connection among them: its end must be the supervisor's alone.
        os.closerange(3, listener.fileno())
        os.closerange(listener.fileno() + 1, 65536)
        serve(listener, proxy_path)
    finally:  # pragma: no cover
        os._exit(0)
    return None  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit("started by the sandbox supervisor")
