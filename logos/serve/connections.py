"""Connections the server holds: bounded, and never held by someone who sends no request.

Anyone on the machine can connect to a loopback port, token or not. uvicorn keeps a new
connection open for as long as its client stays silent (or sends half a request), so a
program that opens connections by the thousand would take every file descriptor: the token's
holder could not connect, and a run's commands could not open pipes. Here:

* a new connection must send a whole request head within `_HEADER_TIMEOUT_S`;
* past `max_connections`, a new connection closes the one that has waited longest without
  a request in progress (new and silent, or idle between keep-alive requests); when every
  connection is busy with a request (event streams included), the new one is closed.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_HEADER_TIMEOUT_S = 10.0
"""A new connection's time to send a whole request head."""
RESERVED_FILES = 256
"""Open files kept for the server's own use (event logs, sessions, commands' pipes)."""


def open_files_limit() -> int:
    """Raise this process's soft limit of open files to the hard one; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(max_connections: int, open_files: int) -> int:
    """`max_connections`, lowered to leave `RESERVED_FILES` descriptors for the rest."""
    return max(4, min(max_connections, open_files - RESERVED_FILES))


def guarded_protocol(max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the bounds above (uvicorn takes a protocol class)."""

    class GuardedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.waiting_since: float = 0.0
            self.header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            super().connection_made(transport)
            self.waiting_since = self.loop.time()
            self.header_deadline = self.loop.call_later(_HEADER_TIMEOUT_S, self._no_request)
            if len(self.connections) > max_connections:
                self._make_room()

        def handle_events(self) -> None:
            super().handle_events()
            if self.header_deadline is not None and not self._waiting():
                self.header_deadline.cancel()
                self.header_deadline = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self.waiting_since = self.loop.time()  # idle until its next request

        def connection_lost(self, exc: Exception | None) -> None:
            if self.header_deadline is not None:
                self.header_deadline.cancel()
                self.header_deadline = None
            super().connection_lost(exc)

        def _waiting(self) -> bool:
            """No request in progress: new and silent, half a head, or idle."""
            return bool(self.conn.their_state is h11.IDLE)

        def _no_request(self) -> None:
            self.header_deadline = None
            if self._waiting():
                self.transport.close()

        def _make_room(self) -> None:
            waiting = [
                other
                for other in self.connections
                if isinstance(other, GuardedH11Protocol)
                and other is not self
                and other._waiting()
                and not other.transport.is_closing()
            ]
            if not waiting:
                self.transport.close()  # every slot serves a request: refuse the newcomer
                return
            min(waiting, key=lambda other: other.waiting_since).transport.close()

    return GuardedH11Protocol
