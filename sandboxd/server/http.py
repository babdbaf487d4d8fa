"""A small HTTP/1.1 server for a pre-bound Unix socket, on anyio and h11.

WHY not uvicorn: commands run as the CALLER's uid:gid and the audit log records who asked,
so every request needs the peer's credentials (SO_PEERCRED), which ASGI servers do not
expose; uvicorn also chmods Unix sockets to 0666. h11 is the same HTTP/1.1 state machine
httpx uses, so both ends agree on the protocol.

What it does: keep-alive; Content-Length and chunked request bodies up to a limit (a larger
declared body is answered 413 without being read); malformed HTTP → 400; every error is JSON
`{"error": {"code", "message"}}`; a handler exception is logged and answered 500 without a
traceback; shutdown stops accepting, lets running requests finish for a grace period, then
cancels them.

A handler may start its answer before it has all of it (`Request.early`): a 200 of NDJSON
lines sent as they come (a command's live output), whose last line is the answer the handler
returns, with the status it would have had alone.

A client that goes away while its request runs cancels the handler (which kills the
command): a close, a half-close, a reset, or more than a request's worth of pipelined bytes
(a client may pipeline its next request, not a flood). One that goes away in the middle of
sending its request is reported as 499.

Connections are capped (below the open-files limit: see sandboxd.server.process). When a client
connects at the cap, the connection idle the longest (waiting for its next request) is closed
to make room; only when none is idle does the newcomer wait (and accepting with it). Idle
keep-alive connections are closed after a timeout. An accept that fails (EMFILE, ENFILE,
ENOBUFS) is logged once and retried with a growing pause; it never ends the server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import socket
import struct
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import anyio
import anyio.abc
import h11

from sandboxd.api import MAX_REQUEST_BODY_BYTES, NDJSON

logger = logging.getLogger(__name__)

_RECEIVE_BYTES = 64 * 1024
_MAX_HEAD_BYTES = 64 * 1024
_SO_PEERCRED = struct.Struct("3i")
_SMALL_BODY_BYTES = 64 * 1024
_ACCEPT_RETRY_FIRST_S = 0.01
_ACCEPT_RETRY_MAX_S = 1.0
CLIENT_GONE = 499
"""The status recorded (never sent) for a request whose client went away first."""


@dataclass(frozen=True)
class PeerCredentials:
    """Who is on the other end of a Unix socket connection, as the kernel says."""

    pid: int
    uid: int
    gid: int


class EarlyAnswer:
    """A handler's answer started before the handler has returned: a 200 of NDJSON lines.

    The first line sends the head. The handler's returned answer then goes as the last line,
    `{"status": S, "answer": <its JSON>}`: S is the status it would have had alone.

    WHY the status inside: once the head is sent it cannot change, and a request can still
    fail after its command started (a job over its caller's cap). A client too slow to take
    a line within the send timeout, or gone, cancels the handler as a disconnect does.
    """

    def __init__(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        send_timeout_s: float,
        client_gone: Callable[[], None],
    ) -> None:
        self._conn = conn
        self._stream = stream
        self._send_timeout_s = send_timeout_s
        self._client_gone = client_gone
        self.started = False
        self._gone = False

    async def send_line(self, line: bytes) -> None:
        """One line of JSON (without its newline)."""
        if self._gone:
            return
        chunks = []
        if not self.started:
            self.started = True
            head = h11.Response(status_code=200, headers=[("content-type", NDJSON)], reason=b"OK")
            chunks.append(self._conn.send(head) or b"")
        chunks += self._conn.send_with_data_passthrough(h11.Data(data=line + b"\n")) or []
        with anyio.move_on_after(self._send_timeout_s) as sending:
            try:
                await self._stream.send(b"".join(chunks))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                sending.cancel()
        if sending.cancel_called:
            self._gone = True
            self._client_gone()


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    """The target without its query string."""
    query: str
    headers: tuple[tuple[str, str], ...]
    """Names lower-cased."""
    body: bytes
    peer: PeerCredentials | None
    early: EarlyAnswer | None = None
    """Lines the handler may send before its answer (None outside a running request)."""

    @property
    def head_only(self) -> bool:
        """A HEAD request: its answer carries the headers of the body but not the body."""
        return self.method == "HEAD"


_STREAMED_STRING_CHARS = 1024 * 1024
"""A JSON answer holding a string longer than this is sent in pieces as it is encoded."""
_PIECE_CHARS = 256 * 1024
"""Characters of a long string encoded at a time: at most 1.5 MiB of JSON (six bytes each)."""
_SEND_BYTES = 256 * 1024
"""Small pieces of a streamed answer are gathered into writes of about this size."""


@dataclass(frozen=True)
class StreamedJson:
    """A JSON document encoded piece by piece while it is sent (chunked), never whole.

    WHY: a control character takes six bytes of JSON, so a reply with two 8 MiB outputs is
    about 100 MB of JSON, and building it whole took twice that while the encoder's buffer
    grew and was copied into bytes. Encoded a slice at a time, an answer holds only its
    strings and the slice in flight."""

    document: Any
    """What json.dumps accepts: dicts, lists, strings, numbers, booleans, None."""

    def pieces(self) -> Iterator[bytes]:
        """The document's JSON, in writes of about _SEND_BYTES."""
        gathered: list[bytes] = []
        size = 0
        for piece in _json_pieces(self.document):
            gathered.append(piece)
            size += len(piece)
            if size >= _SEND_BYTES:
                yield b"".join(gathered)
                gathered, size = [], 0
        if gathered:
            yield b"".join(gathered)


def _json_pieces(value: Any) -> Iterator[bytes]:
    if isinstance(value, dict):
        yield b"{"
        for index, (key, item) in enumerate(value.items()):
            yield (b"," if index else b"") + _dumps(str(key)) + b":"
            yield from _json_pieces(item)
        yield b"}"
    elif isinstance(value, list | tuple):
        yield b"["
        for index, item in enumerate(value):
            if index:
                yield b","
            yield from _json_pieces(item)
        yield b"]"
    elif isinstance(value, str) and len(value) > _PIECE_CHARS:
        yield b'"'
        for start in range(0, len(value), _PIECE_CHARS):
            yield _dumps(value[start : start + _PIECE_CHARS])[1:-1]
        yield b'"'
    else:
        yield _dumps(value)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _has_long_string(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > _STREAMED_STRING_CHARS
    if isinstance(value, dict):
        return any(_has_long_string(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_long_string(item) for item in value)
    return False


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = field(default=())
    release: Callable[[], None] | None = None
    """Called once the response is sent or dropped (its client went away): gives back what
    the handler held for it (its output memory)."""
    streamed: StreamedJson | None = None
    """Sent instead of `body` (then empty), chunked, as it is encoded."""

    @classmethod
    def json(
        cls,
        status: int,
        payload: Any,
        *,
        exclude_none: bool = False,
        release: Callable[[], None] | None = None,
    ) -> Response:
        """`payload`: a pydantic model or anything json.dumps accepts.

        WHY a model goes straight to bytes: a large reply is then built once, not as a str
        and again as its encoding; one with a long string (a command's output) is not built
        at all, but streamed (StreamedJson)."""
        serializer = getattr(payload, "__pydantic_serializer__", None)
        if serializer is not None:
            document = serializer.to_python(payload, mode="json", exclude_none=exclude_none)
            if _has_long_string(document):
                return cls(status, b"", release=release, streamed=StreamedJson(document))
            body = serializer.to_json(payload, exclude_none=exclude_none)
        else:
            body = json.dumps(payload).encode("utf-8")
        return cls(status, body, release=release)

    def finish(self) -> None:
        """The response was sent or dropped: call `release`."""
        if self.release is not None:
            self.release()


def error_response(status: int, code: str, message: str) -> Response:
    return Response.json(status, {"error": {"code": code, "message": message}})


Handler = Callable[[Request], Awaitable[Response]]
Refused = Callable[[Request, int, str], None]
"""Told of each request answered without reaching the handler: (request, status, why).
The request has no body; an unparsable one has an empty method and path."""


def _peer_credentials(sock: socket.socket) -> PeerCredentials | None:
    """SO_PEERCRED of a connected Unix socket (None where the platform has none)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None or sock.family != socket.AF_UNIX:
        return None
    pid, uid, gid = _SO_PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, option, _SO_PEERCRED.size)
    )
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


class _ClientGone(Exception):
    """The peer closed or reset the connection."""


class _Reject(Exception):
    """Answer this error (unless the client is gone) and close the connection."""

    def __init__(self, status: int, code: str, message: str, *, answer: bool = True) -> None:
        super().__init__(message)
        self.response = error_response(status, code, message)
        self.message = message
        self.answer = answer
        self.request = _request(None, b"", None)
        """What is known of the refused request (set where it is read)."""


@dataclass(eq=False)
class _Connection:
    """One client connection, as the accept loop sees it."""

    waiting: anyio.CancelScope | None = None
    """Set while the connection waits for its next request; cancelling it evicts it."""
    evicted: bool = False

    def evict(self) -> None:
        assert self.waiting is not None
        self.evicted = True
        self.waiting.cancel()


class HttpServer:
    """Serves `handler` on a listener until `shutdown()`."""

    def __init__(
        self,
        handler: Handler,
        *,
        on_refused: Refused | None = None,
        max_body_bytes: int = MAX_REQUEST_BODY_BYTES,
        idle_timeout_s: float = 30.0,
        request_timeout_s: float = 30.0,
        max_connections: int = 512,
    ) -> None:
        self._handler = handler
        self._on_refused = on_refused
        self._max_body_bytes = max_body_bytes
        self._max_pipelined_bytes = _MAX_HEAD_BYTES + max_body_bytes
        """More than a request's worth sent while a request runs is abuse, not pipelining."""
        self._idle_timeout_s = idle_timeout_s
        self._request_timeout_s = request_timeout_s
        self._max_connections = max_connections
        self._open_connections = 0
        self._evicting = 0
        """Connections told to close to make room, not closed yet."""
        self._waiting: dict[_Connection, None] = {}
        """Connections waiting for their next request, the longest waiting first."""
        self._room = anyio.Event()
        """Set when a connection ends or starts waiting: the accept loop looks again."""
        self._accept_scope = anyio.CancelScope()
        self._connections_scope = anyio.CancelScope()
        self._grace_scope = anyio.CancelScope()
        self._closing = False
        self._active_requests = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._serving = False
        self._finished = anyio.Event()

    @property
    def active_requests(self) -> int:
        return self._active_requests

    @property
    def open_connections(self) -> int:
        return self._open_connections

    async def serve(
        self,
        listener: anyio.abc.SocketListener,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections until shutdown; returns once every connection has ended."""
        self._serving = True
        try:
            with self._connections_scope:
                async with anyio.create_task_group() as connections:
                    task_status.started()
                    with self._accept_scope:
                        await self._accept_forever(listener, connections)
                    # Stopped accepting: new clients are refused at once instead of queueing.
                    await listener.aclose()
        finally:
            await listener.aclose()
            self._finished.set()

    async def shutdown(self, grace_s: float) -> None:
        """Stop accepting; give running requests `grace_s` to finish; then cancel them all.

        Returns once every connection has ended."""
        self._closing = True
        self._accept_scope.cancel()
        with self._grace_scope:
            self._grace_scope.deadline = anyio.current_time() + grace_s
            await self._idle.wait()
        self._connections_scope.cancel()
        if self._serving:
            await self._finished.wait()

    def cut_grace(self) -> None:
        """End shutdown's grace period now: running requests are cancelled at once."""
        self._grace_scope.cancel()

    async def _accept_forever(
        self, listener: anyio.abc.SocketListener, connections: anyio.abc.TaskGroup
    ) -> None:
        pause = _ACCEPT_RETRY_FIRST_S
        failing = False
        while True:
            try:
                stream = await listener.accept()
            except (OSError, anyio.BrokenResourceError) as exc:
                # EMFILE, ENFILE, ENOBUFS: the connections we have keep being served, and
                # the one waiting in the backlog is taken once descriptors free up.
                if not failing:
                    failing = True
                    logger.error(
                        "cannot accept connections (%s): retrying every %g s at most",
                        exc.__cause__ or exc,
                        _ACCEPT_RETRY_MAX_S,
                    )
                await anyio.sleep(pause)
                pause = min(2 * pause, _ACCEPT_RETRY_MAX_S)
                continue
            if failing:
                failing = False
                pause = _ACCEPT_RETRY_FIRST_S
                logger.info("accepting connections again")
            try:
                await self._make_room()
            except BaseException:
                await anyio.aclose_forcefully(stream)
                raise
            self._open_connections += 1
            connections.start_soon(self._serve_connection, stream)

    async def _make_room(self) -> None:
        """Returns once one more connection may be served: at the cap, the connection that has
        waited longest for its next request is evicted; with none waiting, this waits."""
        while self._open_connections >= self._max_connections:
            self._room = anyio.Event()
            if not self._evicting and self._waiting:
                longest = next(iter(self._waiting))
                del self._waiting[longest]
                self._evicting += 1
                longest.evict()
            await self._room.wait()

    @contextlib.contextmanager
    def _waiting_for_request(self, connection: _Connection) -> Iterator[anyio.CancelScope]:
        """A scope around the wait for a request: it ends at the idle timeout or on eviction."""
        with anyio.move_on_after(self._idle_timeout_s) as scope:
            connection.waiting = scope
            self._waiting[connection] = None
            self._room.set()
            try:
                yield scope
            finally:
                self._waiting.pop(connection, None)
                connection.waiting = None

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        connection = _Connection()
        try:
            async with stream:
                raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
                peer = _peer_credentials(raw)
                await self._exchange_loop(stream, peer, connection)
        except (_ClientGone, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        except Exception:
            # WHY caught here: an escaping error would end the task group of every
            # connection, i.e. the whole server.
            logger.exception("connection failed")
        finally:
            self._open_connections -= 1
            if connection.evicted:
                self._evicting -= 1
            self._room.set()

    async def _exchange_loop(
        self,
        stream: anyio.abc.SocketStream,
        peer: PeerCredentials | None,
        connection: _Connection,
    ) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
        while await self._exchange(conn, stream, peer, connection):
            conn.start_next_cycle()

    async def _exchange(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        peer: PeerCredentials | None,
        connection: _Connection,
    ) -> bool:
        """Read one request and answer it; True when the connection may take another.

        WHY a call of its own: its locals (a reply of up to ~100 MB) must be gone while the
        connection waits for its next request."""
        try:
            request = await self._read_request(conn, stream, peer, connection)
        except _Reject as reject:
            self._refused(reject.request, reject.response.status, reject.message)
            if reject.answer:
                await self._send(conn, stream, reject.response, close=True)
            return False
        if request is None:
            return False
        if self._closing:
            why = "sandboxd is shutting down: retry once it is restarted"
            self._refused(request, 503, why)
            refusal = error_response(503, "shutting_down", why)
            await self._send(conn, stream, refusal, close=True, head_only=request.head_only)
            return False
        self._active_requests += 1
        if self._active_requests == 1:
            self._idle = anyio.Event()
        try:
            response, started = await self._run_handler(conn, stream, request)
            if response is None:
                return False
            try:
                await self._send(
                    conn,
                    stream,
                    response,
                    close=self._closing,
                    head_only=request.head_only,
                    as_last_line=started,
                )
            finally:
                response.finish()
        finally:
            self._active_requests -= 1
            if self._active_requests == 0:
                self._idle.set()
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _read_request(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        peer: PeerCredentials | None,
        connection: _Connection,
    ) -> Request | None:
        """The next complete request; None when the client closed the connection cleanly, or
        it stayed idle too long, or it was evicted."""
        head: h11.Request | None = None
        try:
            try:
                with self._waiting_for_request(connection) as waiting:
                    event = await self._next_event(conn, stream)
                if waiting.cancelled_caught:
                    return None
                if isinstance(event, h11.ConnectionClosed):
                    return None
                if not isinstance(event, h11.Request):
                    raise _Reject(400, "bad_request", "expected an HTTP request")
                head = event
                self._check_declared_length(head)
                if conn.they_are_waiting_for_100_continue:
                    # curl sends large bodies only after this (or after waiting a second).
                    interim = h11.InformationalResponse(status_code=100, headers=[])
                    await stream.send(conn.send(interim) or b"")
                with anyio.fail_after(self._request_timeout_s):
                    body = await self._read_body(conn, stream)
            except h11.RemoteProtocolError as exc:
                raise _Reject(400, "bad_request", f"malformed HTTP request: {exc}") from None
            except TimeoutError:
                raise _Reject(
                    408, "request_timeout", "the request body did not arrive in time: send it whole"
                ) from None
            except _ClientGone:
                if head is None and not conn.trailing_data[0]:
                    raise  # gone between requests: nothing to report
                raise _Reject(
                    CLIENT_GONE,
                    "client_gone",
                    "the client went away before its request was complete",
                    answer=False,
                ) from None
        except _Reject as reject:
            reject.request = _request(head, b"", peer)
            raise
        return _request(head, body, peer)

    def _refused(self, request: Request, status: int, why: str) -> None:
        if self._on_refused is not None:
            self._on_refused(request, status, why)

    def _check_declared_length(self, head: h11.Request) -> None:
        for name, value in head.headers:
            if name == b"content-length" and int(value) > self._max_body_bytes:
                raise self._too_large()

    def _too_large(self) -> _Reject:
        return _Reject(
            413,
            "body_too_large",
            f"the request body is larger than {self._max_body_bytes} bytes: send a smaller one",
        )

    async def _read_body(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> bytes:
        body = bytearray()
        while True:
            event = await self._next_event(conn, stream)
            if isinstance(event, h11.Data):
                body += event.data
                # WHY checked as it arrives: a chunked body declares no length up front.
                if len(body) > self._max_body_bytes:
                    raise self._too_large()
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                raise _ClientGone

    async def _next_event(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> Any:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await _receive(stream)
            if not data and (conn.their_state is not h11.IDLE or conn.trailing_data[0]):
                raise _ClientGone  # in the middle of a request
            conn.receive_data(data)

    async def _run_handler(
        self, conn: h11.Connection, stream: anyio.abc.SocketStream, request: Request
    ) -> tuple[Response | None, bool]:
        """The handler's response (None when the client went away: the handler was
        cancelled), and whether the handler started it early (`EarlyAnswer`)."""
        response: Response | None = None
        client_gone = False

        async def watch_disconnect(scope: anyio.CancelScope) -> None:
            nonlocal client_gone
            pipelined = 0
            while True:
                try:
                    data = await _receive(stream)
                except (_ClientGone, anyio.BrokenResourceError, OSError):
                    data = b""
                if not data:
                    break  # closed, half-closed or reset
                pipelined += len(data)
                if pipelined > self._max_pipelined_bytes:
                    logger.warning(
                        "a client sent over %d bytes while its %s %s ran: closing its connection",
                        self._max_pipelined_bytes,
                        request.method,
                        request.path,
                    )
                    break
                # Its next request, pipelined: h11 keeps it for the next cycle.
                conn.receive_data(data)
            client_gone = True
            scope.cancel()

        def gone() -> None:
            nonlocal client_gone
            client_gone = True
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(watch_disconnect, group.cancel_scope)
            early = EarlyAnswer(conn, stream, self._request_timeout_s, gone)
            response = await self._call_handler(dataclasses.replace(request, early=early))
            group.cancel_scope.cancel()
        if client_gone and response is not None:
            response.finish()
            return None, early.started
        return response, early.started

    async def _call_handler(self, request: Request) -> Response:
        try:
            return await self._handler(request)
        except Exception:
            logger.exception("handler failed for %s %s", request.method, request.path)
            return error_response(
                500, "internal_error", "sandboxd failed to handle the request; see its log"
            )

    async def _send(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        response: Response,
        *,
        close: bool,
        head_only: bool = False,
        as_last_line: bool = False,
    ) -> None:
        if as_last_line:
            await self._send_last_line(conn, stream, response)
            return
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        streamed = response.streamed
        headers = [("content-type", "application/json"), *response.headers]
        if streamed is None:
            # Without it, h11 sends the body chunked (or, to an HTTP/1.0 client, until close).
            headers.insert(1, ("content-length", str(len(response.body))))
        if close:
            headers.append(("connection", "close"))
        try:
            head = h11.Response(
                status_code=response.status,
                headers=headers,
                reason=_reason(response.status),
            )
            chunks = [conn.send(head) or b""]
            if not head_only and streamed is None:
                chunks += conn.send_with_data_passthrough(h11.Data(data=response.body)) or []
            if head_only or streamed is None:
                chunks.append(conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            logger.exception("cannot answer %s on this connection", response.status)
            return
        # WHY joined only when small: one write saves a turn of the event loop on every
        # answer, but joining a large body (up to ~100 MB) would copy it whole.
        if len(response.body) <= _SMALL_BODY_BYTES:
            chunks = [b"".join(chunks)]
        with anyio.move_on_after(self._request_timeout_s) as sending:
            for chunk in chunks:
                if chunk:
                    await stream.send(chunk)
            if not head_only and streamed is not None:
                for piece in streamed.pieces():
                    framed = conn.send_with_data_passthrough(h11.Data(data=piece)) or []
                    await stream.send(b"".join(framed))
                await stream.send(conn.send(h11.EndOfMessage()) or b"")
        if sending.cancelled_caught:
            raise _ClientGone

    async def _send_last_line(
        self, conn: h11.Connection, stream: anyio.abc.SocketStream, response: Response
    ) -> None:
        """The handler's answer as the last line of the answer it started (`EarlyAnswer`)."""
        if conn.our_state is not h11.SEND_BODY:
            return
        pieces = response.streamed.pieces() if response.streamed else iter((response.body,))
        with anyio.move_on_after(self._request_timeout_s) as sending:
            await stream.send(
                b"".join(
                    conn.send_with_data_passthrough(
                        h11.Data(data=b'{"status":%d,"answer":' % response.status)
                    )
                    or []
                )
            )
            for piece in pieces:
                await stream.send(
                    b"".join(conn.send_with_data_passthrough(h11.Data(data=piece)) or [])
                )
            closing = conn.send_with_data_passthrough(h11.Data(data=b"}\n")) or []
            await stream.send(b"".join([*closing, conn.send(h11.EndOfMessage()) or b""]))
        if sending.cancelled_caught:
            raise _ClientGone


def _request(head: h11.Request | None, body: bytes, peer: PeerCredentials | None) -> Request:
    """The request `head` announced (an empty method and path when there was none)."""
    if head is None:
        return Request(method="", path="", query="", headers=(), body=body, peer=peer)
    target = head.target.decode("ascii", "replace")
    path, _, query = target.partition("?")
    return Request(
        method=head.method.decode("ascii", "replace").upper(),
        path=path,
        query=query,
        headers=tuple(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in head.headers
        ),
        body=body,
        peer=peer,
    )


async def _receive(stream: anyio.abc.SocketStream) -> bytes:
    """Bytes from the peer; b"" at end of stream."""
    try:
        return await stream.receive(_RECEIVE_BYTES)
    except anyio.EndOfStream:
        return b""
    except ConnectionResetError as exc:
        raise _ClientGone from exc


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""
