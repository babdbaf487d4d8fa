"""sandboxd's HTTP/1.1 server on a real Unix socket: framing, limits, errors, peers, shutdown."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest

from sandboxd.server.http import HttpServer, Refused, Request, Response

pytestmark = pytest.mark.anyio


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # WHY not tmp_path: Unix socket paths must stay under 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="sdh", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _echo(request: Request) -> Response:
    peer = request.peer
    return Response.json(
        200,
        {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "body_bytes": len(request.body),
            "peer": [peer.pid, peer.uid, peer.gid] if peer else None,
        },
    )


class _Hanging:
    """A handler that never answers: `started` is set once a request reaches it, `cancelled`
    once the server cancels that request."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()

    async def __call__(self, request: Request) -> Response:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


async def _sent_get(path: Path, target: str) -> anyio.abc.SocketStream:
    """A connection to the server at `path` that has sent `GET target`."""
    stream = await anyio.connect_unix(path)
    await stream.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return stream


@asynccontextmanager
async def _serving(
    socket_dir: Path,
    handler: Callable[[Request], Awaitable[Response]],
    on_refused: Refused | None = None,
    **options: float,
) -> AsyncIterator[tuple[Path, HttpServer]]:
    path = socket_dir / "s.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.fspath(path))
    sock.listen(64)
    listener = await anyio.abc.SocketListener.from_socket(sock)
    server = HttpServer(handler, on_refused=on_refused, **options)  # type: ignore[arg-type]
    async with anyio.create_task_group() as group:
        await group.start(server.serve, listener)
        yield path, server
        await server.shutdown(0)


@asynccontextmanager
async def _hanging_request(
    socket_dir: Path,
) -> AsyncIterator[tuple[anyio.abc.SocketStream, HttpServer, _Hanging]]:
    """A server whose handler never answers, and a connection whose `GET /slow` reached it."""
    slow = _Hanging()
    async with _serving(socket_dir, slow) as (path, server):
        stream = await _sent_get(path, "/slow")
        with anyio.fail_after(10):
            await slow.started.wait()
        yield stream, server, slow


async def _get_on(stream: anyio.abc.SocketStream, target: str, *, until: bytes) -> bytes:
    """`GET target` on an open connection, read until `until` came: the raw answer so far."""
    await stream.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    received = b""
    with anyio.fail_after(10):
        while until not in received:
            received += await stream.receive()
    return received


async def _exchange(path: Path, raw: bytes, *, read_until_close: bool = True) -> bytes:
    async with await anyio.connect_unix(path) as stream:
        # The server may answer and close before reading everything: read the answer anyway.
        with contextlib.suppress(anyio.BrokenResourceError):
            await stream.send(raw)
        received = b""
        with anyio.fail_after(10):
            while True:
                try:
                    chunk = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
                received += chunk
                if not read_until_close and b"\r\n\r\n" in received:
                    head, _, body = received.partition(b"\r\n\r\n")
                    length = int(_header(head, b"content-length") or 0)
                    if len(body) >= length:
                        break
        return received


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _status_and_json(raw: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


async def test_json_answer_with_the_peer_credentials(socket_dir: Path) -> None:
    async with _serving(socket_dir, _echo) as (path, _):
        transport = httpx.AsyncHTTPTransport(uds=os.fspath(path))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            response = await client.post("/a/b?x=1", content=b"12345")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "method": "POST",
        "path": "/a/b",
        "query": "x=1",
        "body_bytes": 5,
        "peer": [os.getpid(), os.getuid(), os.getgid()],
    }


async def test_keep_alive_serves_several_requests_on_one_connection(socket_dir: Path) -> None:
    async with (
        _serving(socket_dir, _echo) as (path, _),
        await anyio.connect_unix(path) as stream,
    ):
        for index in range(3):
            status, body = _status_and_json(await _get_on(stream, f"/n{index}", until=b'"peer"'))
            assert (status, body["path"]) == (200, f"/n{index}")


async def test_head_is_answered_with_headers_only_and_keeps_the_connection(
    socket_dir: Path,
) -> None:
    async with (
        _serving(socket_dir, _echo) as (path, _),
        await anyio.connect_unix(path) as stream,
    ):
        await stream.send(b"HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        with anyio.fail_after(10):
            while b"\r\n\r\n" not in received:
                received += await stream.receive()
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and rest == b""
        assert int(_header(head, b"content-length") or 0) > 0
        await stream.send(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        with anyio.fail_after(10):
            while b'"peer"' not in received:
                received += await stream.receive()
        status, body = _status_and_json(received)
        assert (status, body["method"], body["path"]) == (200, "GET", "/after")


async def test_malformed_http_is_answered_400_in_json(socket_dir: Path) -> None:
    async with _serving(socket_dir, _echo) as (path, _):
        raw = await _exchange(path, b"THIS IS NOT HTTP\r\n\r\n")
    status, body = _status_and_json(raw)
    assert status == 400
    assert body["error"]["code"] == "bad_request"  # type: ignore[index]
    assert "malformed" in body["error"]["message"]  # type: ignore[index]


async def test_a_declared_large_body_gets_413_without_being_sent(socket_dir: Path) -> None:
    async with _serving(socket_dir, _echo) as (path, _):
        # Only the head is sent: were the server waiting for the body, this would time out.
        raw = await _exchange(
            path,
            b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n",
        )
    status, body = _status_and_json(raw)
    assert status == 413
    assert body["error"]["code"] == "body_too_large"  # type: ignore[index]
    assert b"connection: close" in raw.lower()


async def test_requests_answered_by_the_server_itself_are_reported(socket_dir: Path) -> None:
    refused: list[tuple[str, str, int, str, int | None]] = []

    def note(request: Request, status: int, why: str) -> None:
        uid = request.peer.uid if request.peer else None
        refused.append((request.method, request.path, status, why, uid))

    async with _serving(socket_dir, _echo, note) as (path, _):
        await _exchange(
            path, b"POST /v1/run?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n"
        )
        await _exchange(path, b"THIS IS NOT HTTP\r\n\r\n")
    assert refused[0][:3] == ("POST", "/v1/run", 413) and refused[0][4] == os.getuid()
    assert "larger than" in refused[0][3]
    assert refused[1][:3] == ("", "", 400) and "malformed" in refused[1][3]
    assert len(refused) == 2


async def test_httpx_sees_the_413_even_while_it_is_still_sending(socket_dir: Path) -> None:
    async with _serving(socket_dir, _echo) as (path, _):
        transport = httpx.AsyncHTTPTransport(uds=os.fspath(path))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            response = await client.post("/v1/run", content=b"x" * (4 * 1024 * 1024))
    assert response.status_code == 413


async def test_expect_100_continue_is_answered_before_the_body(socket_dir: Path) -> None:
    async with (
        _serving(socket_dir, _echo) as (path, _),
        await anyio.connect_unix(path) as stream,
    ):
        await stream.send(
            b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
        )
        with anyio.fail_after(10):
            interim = await stream.receive()
        assert interim.startswith(b"HTTP/1.1 100 ")
        await stream.send(b"abc")
        received = b""
        with anyio.fail_after(10):
            while b'"peer"' not in received:
                received += await stream.receive()
    assert _status_and_json(received)[1]["body_bytes"] == 3


async def test_chunked_bodies_are_read_and_limited(socket_dir: Path) -> None:
    async with _serving(socket_dir, _echo) as (path, _):
        small = await _exchange(
            path,
            b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            read_until_close=False,
        )
        chunk = b"x" * 65536
        big = (
            b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + (b"%x\r\n%s\r\n" % (len(chunk), chunk)) * 17
        )
        too_big = await _exchange(path, big)
    assert _status_and_json(small) == (
        200,
        {
            "method": "POST",
            "path": "/c",
            "query": "",
            "body_bytes": 11,
            "peer": [os.getpid(), os.getuid(), os.getgid()],
        },
    )
    assert _status_and_json(too_big)[0] == 413


async def test_a_failing_handler_is_a_500_without_traceback(socket_dir: Path) -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("secret internal detail")

    async with _serving(socket_dir, broken) as (path, _):
        raw = await _exchange(path, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, body = _status_and_json(raw)
    assert status == 500
    assert body["error"]["code"] == "internal_error"  # type: ignore[index]
    assert b"secret internal detail" not in raw and b"Traceback" not in raw


@pytest.mark.timeout(30)
async def test_a_client_that_goes_away_cancels_its_request(socket_dir: Path) -> None:
    async with _hanging_request(socket_dir) as (stream, server, slow):
        assert server.active_requests == 1
        await stream.aclose()
        with anyio.fail_after(10):
            await slow.cancelled.wait()
        with anyio.fail_after(10):
            while server.active_requests:
                await anyio.sleep(0.01)


@pytest.mark.timeout(30)
async def test_shutdown_lets_running_requests_finish_within_the_grace(socket_dir: Path) -> None:
    release = anyio.Event()

    async def waits(request: Request) -> Response:
        await release.wait()
        return Response.json(200, {"done": True})

    async with _serving(socket_dir, waits) as (path, server):
        answers: list[bytes] = []

        async def client() -> None:
            answers.append(await _exchange(path, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))

        async with anyio.create_task_group() as group:
            group.start_soon(client)
            with anyio.fail_after(10):
                while not server.active_requests:
                    await anyio.sleep(0.01)
            group.start_soon(server.shutdown, 30.0)
            await anyio.sleep(0.2)
            release.set()
    status, body = _status_and_json(answers[0])
    assert (status, body) == (200, {"done": True})
    assert b"connection: close" in answers[0].lower()


@pytest.mark.timeout(30)
async def test_shutdown_cancels_requests_still_running_after_the_grace(socket_dir: Path) -> None:
    async with _hanging_request(socket_dir) as (stream, server, never):
        with anyio.fail_after(10):
            while not server.active_requests:
                await anyio.sleep(0.01)
        await server.shutdown(0.2)
        assert never.cancelled.is_set()
        await stream.aclose()


async def _answered(stream: anyio.abc.SocketStream, path: str) -> dict[str, object]:
    return _status_and_json(await _get_on(stream, path, until=b'"peer"'))[1]


async def _closed_by_server(stream: anyio.abc.SocketStream) -> bool:
    with anyio.fail_after(10):
        try:
            await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return True
    return False


@pytest.mark.timeout(30)
async def test_at_the_cap_the_longest_idle_connection_makes_room(socket_dir: Path) -> None:
    async with (
        _serving(socket_dir, _echo, max_connections=2) as (path, server),
        await anyio.connect_unix(path) as oldest,
        await anyio.connect_unix(path) as newer,
    ):
        assert (await _answered(oldest, "/a"))["path"] == "/a"
        assert (await _answered(newer, "/b"))["path"] == "/b"
        async with await anyio.connect_unix(path) as third:
            assert (await _answered(third, "/c"))["path"] == "/c"
            assert await _closed_by_server(oldest)
            assert (await _answered(newer, "/d"))["path"] == "/d"
            assert server.open_connections == 2


@pytest.mark.timeout(30)
async def test_at_the_cap_with_no_idle_connection_accepting_waits(socket_dir: Path) -> None:
    release = anyio.Event()

    async def held(request: Request) -> Response:
        if request.path == "/hold":
            await release.wait()
        return await _echo(request)

    async with (
        _serving(socket_dir, held, max_connections=1) as (path, server),
        await anyio.connect_unix(path) as busy,
    ):
        await busy.send(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        with anyio.fail_after(10):
            while not server.active_requests:
                await anyio.sleep(0.01)
        async with await anyio.connect_unix(path) as waiting:
            await waiting.send(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
            with anyio.move_on_after(0.5) as early:
                await waiting.receive()
            assert early.cancelled_caught, "a connection past the cap was served"
            release.set()
            received = b""
            with anyio.fail_after(10):
                while b'"peer"' not in received:
                    received += await waiting.receive()
            assert _status_and_json(received)[1]["path"] == "/next"


@pytest.mark.timeout(30)
async def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(
    socket_dir: Path,
) -> None:
    async with (
        _serving(socket_dir, _echo, idle_timeout_s=0.3) as (path, server),
        await anyio.connect_unix(path) as stream,
    ):
        assert (await _answered(stream, "/once"))["path"] == "/once"
        assert await _closed_by_server(stream)
        with anyio.fail_after(10):
            while server.open_connections:
                await anyio.sleep(0.01)


@pytest.mark.timeout(30)
async def test_a_sent_response_is_released_once(socket_dir: Path) -> None:
    released: list[str] = []

    async def answer(request: Request) -> Response:
        return Response.json(200, {"ok": True}, release=lambda: released.append(request.path))

    async with _serving(socket_dir, answer) as (path, _), await anyio.connect_unix(path) as stream:
        for index in range(2):
            await _get_on(stream, f"/r{index}", until=b'"ok"')
    assert released == ["/r0", "/r1"]


@pytest.mark.timeout(30)
async def test_a_response_whose_client_went_away_is_released(socket_dir: Path) -> None:
    released: list[int] = []

    async def answer(request: Request) -> Response:
        return Response.json(200, {"x": "y" * 10_000_000}, release=lambda: released.append(1))

    async with _serving(socket_dir, answer) as (path, server):
        stream = await _sent_get(path, "/big")
        await stream.aclose()  # before or while the 10 MB answer is sent
        with anyio.fail_after(10):
            while not released or server.open_connections:
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)
    assert released == [1]


@pytest.mark.timeout(30)
async def test_pipelined_bytes_then_close_cancel_the_request(socket_dir: Path) -> None:
    async with _hanging_request(socket_dir) as (stream, _, slow):
        await stream.send(b"G")
        await anyio.sleep(0.2)
        await stream.aclose()
        with anyio.fail_after(10):
            await slow.cancelled.wait()


@pytest.mark.timeout(30)
async def test_a_client_gone_mid_request_is_reported_499(socket_dir: Path) -> None:
    refused: list[tuple[str, str, int, str]] = []

    def note(request: Request, status: int, why: str) -> None:
        refused.append((request.method, request.path, status, why))

    async with _serving(socket_dir, _echo, note) as (path, server):
        async with await anyio.connect_unix(path) as mid_body:
            await mid_body.send(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
            await anyio.sleep(0.1)
        async with await anyio.connect_unix(path) as mid_head:
            await mid_head.send(b"POST /h HTTP/1.1\r\nHo")
            await anyio.sleep(0.1)
        async with await anyio.connect_unix(path):
            pass  # gone before sending anything: nothing to report
        with anyio.fail_after(10):
            while server.open_connections:
                await anyio.sleep(0.01)
    assert [(method, where, status) for method, where, status, _ in refused] == [
        ("POST", "/b", 499),
        ("", "", 499),
    ]
    assert all("went away" in why for *_, why in refused)
