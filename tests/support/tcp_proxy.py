"""A TCP proxy on loopback whose connections the test can cut: a real dropped connection
between a client and a server, both unaware of the proxy."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class CuttableProxy:
    """Forwards every connection to `target`; `cut()` closes those open now."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            cutting, self._open = self._open, []
        for sock in cutting:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:  # the server is gone: so is this connection
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
                self.accepted += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def cuttable_proxy(host: str, port: int) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy((host, port))
    try:
        yield proxy
    finally:
        proxy.close()
