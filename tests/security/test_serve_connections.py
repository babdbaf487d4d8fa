"""Attack: any local program can connect to the server's loopback port without the token.
Holding thousands of connections open, sending nothing (or half a request), it must not
lock the token's holder out, nor starve a run's commands of file descriptors."""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.cli_harness import Home
from tests.support.serve_harness import read_events, start_serve
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(180)

DESKTOP_OPEN_FILES = 1024
"""The usual soft limit of open files on a desktop, which the server starts with here."""
FLOOD = 1500
"""More connections than that limit allows."""
CONFIG = """check_back = false
[serve]
allow_local_auto = true
max_connections = 64
"""


@contextlib.contextmanager
def _open_files(wanted: int) -> Iterator[None]:
    """This process's soft limit of open files (a server started meanwhile inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _flood(address: tuple[str, int], count: int, first_bytes: bytes) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(2)
        try:
            sock.connect(address)
            if first_bytes:
                sock.sendall(first_bytes)
        except OSError:
            sock.close()
            continue
        sockets.append(sock)
    return sockets


@pytest.mark.parametrize(
    "first_bytes",
    [b"", b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\n"],
    ids=["silent", "half-request"],
)
def test_a_connection_flood_without_the_token_locks_nobody_out(
    home: Home, sse_server: ScriptedServer, first_bytes: bytes
) -> None:
    sse_server.enqueue(openai_stream("<cmd>echo still-working</cmd>"), openai_stream("Done."))
    with _open_files(DESKTOP_OPEN_FILES):
        served = start_serve(home, sse_server, config=CONFIG)
    with contextlib.ExitStack() as stack, _open_files(FLOOD + 512):
        stack.callback(served.stop)
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        flood = _flood((host, int(port)), FLOOD, first_bytes)
        try:
            started = time.monotonic()
            with served.client(timeout=20) as client:
                answer = client.get("/v1/sessions")
                waited = time.monotonic() - started
                assert answer.status_code == 200, answer.text
                run = served.start_run(client, prompt="work", approval="auto")
                events = read_events(client, run["run"])
        except httpx.HTTPError as exc:
            raise AssertionError(
                f"the token's holder was locked out by {len(flood)} connections: {exc!r}"
            ) from None
        finally:
            for sock in flood:
                sock.close()
        result = next(e for e in events if e.type == "command_result").data["result"]
        assert result["stdout"] == "still-working\n", result
        assert waited < 10, f"the answer took {waited:.1f} s"
        assert served.proc.poll() is None
