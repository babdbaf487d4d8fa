"""A daemon that answers with an endless body (broken, or hostile) cannot make logos hold it:
the temenos runner reads at most MAX_ANSWER_BYTES of an answer, then says what happened."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

from logos.temenos.client import MAX_ANSWER_BYTES

FLOOD_BYTES = 256 * 1024 * 1024
"""What the daemon sends at most: far more than any command's output it should send."""
_CHUNK = 1024 * 1024

_CLIENT = """
import anyio
from logos.options import ExecOptions
from logos.temenos.runner import TemenosRunner

async def main(address):
    async with TemenosRunner(address) as runner:
        result = await runner.run("true", ExecOptions())
    print(result.error)
    peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(int(peak.split()[1]) // 1024)

import sys
anyio.run(main, sys.argv[1])
"""


@contextmanager
def flooding_daemon() -> Iterator[str]:
    """A TCP server that answers a request with a JSON body of FLOOD_BYTES."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with suppress(OSError):
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                # No length: the body ends when the connection does.
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b'connection: close\r\n\r\n{"stdout": "'
                )
                for _ in range(FLOOD_BYTES // _CHUNK):
                    connection.sendall(b"A" * _CHUNK)
                connection.sendall(b'"}')

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        listener.close()


@pytest.mark.timeout(120)
def test_an_endless_answer_is_cut_and_said() -> None:
    with flooding_daemon() as address:
        done = subprocess.run(
            [sys.executable, "-c", _CLIENT, address], capture_output=True, text=True, timeout=100
        )
    assert done.returncode == 0, done.stderr
    error, peak_mib = done.stdout.splitlines()
    assert f"over {MAX_ANSWER_BYTES // (1024 * 1024)} MiB" in error
    assert int(peak_mib) < 200, f"the client peaked at {peak_mib} MiB"
