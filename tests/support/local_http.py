"""What the tests' HTTP servers share: a real ThreadingHTTPServer on a free port of
127.0.0.1, served from a thread while a `with` block runs and shut down at its end."""

from __future__ import annotations

import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # WHY: clients close idle keep-alive connections at will, and some tests kill a client
        # or make it give up mid-body; that is not an error of the server.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class LocalHTTPServer:
    """The base of a test server: a subclass says which handler answers (`_handler`), and
    its handlers see `_stopping` set once the `with` block ends. With `tls`, it speaks
    HTTPS: every connection accepted shakes hands with that server-side context."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def _scheme(self) -> str:
        return "http" if self._tls is None else "https"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        if self._tls is not None:
            self._httpd.socket = self._tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
