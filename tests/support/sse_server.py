"""A real HTTP server on 127.0.0.1 that replays scripted replies, for tests of code that
talks to model APIs (providers, the loop, the CLI).

It is a test double of a remote API, not something we ship; but it speaks real HTTP/1.1
over a real socket, so clients meet real framing, real flush boundaries and real
disconnects.

Usage::

    with ScriptedServer() as server:          # or the `sse_server` fixture below
        server.enqueue(
            openai_stream("Hello", usage={"prompt_tokens": 12, "completion_tokens": 2}),
            json_error(429, "slow down", headers={"retry-after": "0.2"}),
            anthropic_stream("Hi", thinking="hmm", signature="sig"),
        )
        provider = OpenAIProvider(model="m", base_url=server.base_url + "/v1")
        ...
        server.requests[0].json["messages"]    # what the client sent

Each request takes the next reply from the queue, whatever its path (a request with no
reply left gets a 501 that says so). A reply is a status, headers and a body made of
steps, written in order:

- `bytes`: written and flushed as one piece (one HTTP chunk when chunked), so a test
  chooses the byte boundaries the client sees: inside a `data:` line, inside a
  multi-byte UTF-8 character, between CR and LF;
- `Pause(seconds)`: wait; a client that disconnects meanwhile is noticed at once;
- `Drop()`: close the socket without finishing the body (`Drop(reset=True)` sends a TCP
  reset instead of a clean FIN).

`Reply(drop_before_response=True)` (or `dropped_connection()`) closes the connection after
reading the request, before any byte of an answer. `headers_delay_s` waits before the
status line (to trigger a client's read timeout).

Builders make whole streams in both wire formats: `openai_stream(...)` and
`anthropic_stream(...)` turn a reply text (plus reasoning, finish reason and usage) into
the exact events those APIs send; `wire_chunk_size` re-splits the body into writes of that
many bytes, `drop_after` cuts the connection after that many events, and `event_pause_s`
waits between events. `json_error(...)` and `anthropic_error(...)` build error answers.

`server.answer_with(function)` answers every request the queue has no reply for with
`function(request)`: a model that replies to what it is sent (many conversations at once,
in whatever order they arrive).

Every URL of a server starts with a path of its own (`base_url` includes it): a request
without it (a client of an earlier test whose server had the same port, retrying) is
answered 404 and takes no reply from the queue.

`server.requests` lists what was received (method, path without the server's own prefix,
lower-cased headers, body, arrival time, and `.json`); `server.wait_for_disconnect()` tells
whether a client hung up in the middle of a reply (it blocks: from async code call it
through `anyio.to_thread.run_sync`).

The `sse_server` fixture gives each test a running server once this module is registered
as a plugin (`pytest_plugins = ["tests.support.sse_server"]` in the root conftest).
"""

from __future__ import annotations

import json
import queue
import secrets
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, TypedDict, Unpack

import pytest

from tests.support.local_http import LocalHTTPServer

_SSE_HEADERS: Mapping[str, str] = {"content-type": "text/event-stream", "cache-control": "no-cache"}
_JSON_HEADERS: Mapping[str, str] = {"content-type": "application/json"}
_POLL_S = 0.05


@dataclass(frozen=True)
class Pause:
    """Wait this long before the next step."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection here, leaving the body unfinished."""

    reset: bool = False
    """Send a TCP reset (RST) rather than a clean close (FIN)."""


Step = bytes | Pause | Drop


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=lambda: dict(_SSE_HEADERS))
    body: Sequence[Step] = ()
    chunked: bool = True
    """Frame the body with chunked transfer encoding; False sends a Content-Length."""
    drop_before_response: bool = False
    headers_delay_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    """Header names lower-cased."""
    body: bytes
    received_at: float
    """`time.monotonic()` when the request had been read."""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class ScriptedServer(LocalHTTPServer):
    """The server; see the module docstring. Start and stop it with `with`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(tls)
        self._replies: queue.SimpleQueue[Reply] = queue.SimpleQueue()
        self._answer: Callable[[RecordedRequest], Reply] | None = None
        self._requests: list[RecordedRequest] = []
        self._model_requests: list[RecordedRequest] = []
        self.models: dict[str, Any] = {"object": "list", "data": [{"id": "m"}]}
        """What `GET …/models` answers, outside the queue: an OpenAI-compatible server
        lists its models whatever else is scripted (`owned_by: llamacpp` makes it
        llama.cpp's)."""
        self._lock = threading.Lock()
        self._disconnected = threading.Event()
        self._prefix = f"/t{secrets.token_hex(6)}"

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not running: use `with ScriptedServer() as s:`")
        host, port = self._httpd.server_address[:2]
        return f"{self._scheme}://{host!s}:{port}{self._prefix}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The `GET …/models` requests, answered from `models` (not in `requests`)."""
        with self._lock:
            return list(self._model_requests)

    @property
    def pending_replies(self) -> int:
        return self._replies.qsize()

    def enqueue(self, *replies: Reply) -> None:
        for reply in replies:
            self._replies.put(reply)

    def answer_with(self, answer: Callable[[RecordedRequest], Reply]) -> None:
        """Answer requests the queue has no reply for with `answer(request)`."""
        self._answer = answer

    def wait_for_disconnect(self, timeout: float = 10.0) -> bool:
        """True once a client closed its connection while a reply was still being sent."""
        return self._disconnected.wait(timeout)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("_BoundHandler", (_Handler,), {"scripted": self})

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_reply(self, request: RecordedRequest) -> Reply | None:
        try:
            return self._replies.get_nowait()
        except queue.Empty:
            return None if self._answer is None else self._answer(request)


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    scripted: ScriptedServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: test output is for the tests."""

    def do_POST(self) -> None:
        self._serve()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        prefix = self.scripted._prefix
        own = self.path == prefix or self.path.startswith((prefix + "/", prefix + "?"))
        request = RecordedRequest(
            method=self.command,
            path=(self.path.removeprefix(prefix) or "/") if own else self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=time.monotonic(),
        )
        if not own:
            self._answer(json_error(404, f"sse_server: {self.path} is not this test's server"))
            return
        if self.command == "GET" and request.path.rstrip("/").endswith("/models"):
            with self.scripted._lock:
                self.scripted._model_requests.append(request)
            self._answer(json_reply(self.scripted.models))
            return
        self.scripted._record(request)
        reply = self.scripted._next_reply(request)
        if reply is None:
            reply = json_error(
                501, f"sse_server: no scripted reply left for {self.command} {request.path}"
            )
        try:
            self._answer(reply)
        except (_ClientGone, BrokenPipeError, ConnectionResetError):
            self.scripted._disconnected.set()
            self.close_connection = True

    def _answer(self, reply: Reply) -> None:
        if reply.drop_before_response:
            self._drop(Drop())
            return
        if reply.headers_delay_s:
            self._pause(reply.headers_delay_s)
        self.send_response_only(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            total = sum(len(step) for step in reply.body if isinstance(step, bytes))
            self.send_header("content-length", str(total))
        if reply.headers.get("connection", "").lower() == "close":
            self.close_connection = True
        self.end_headers()
        for step in reply.body:
            if isinstance(step, Pause):
                self._pause(step.seconds)
            elif isinstance(step, Drop):
                self._drop(step)
                return
            elif step:
                frame = b"%x\r\n%s\r\n" % (len(step), step) if reply.chunked else step
                self.wfile.write(frame)
                self.wfile.flush()
        if reply.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            if self.scripted._stopping.is_set():
                raise _ClientGone
            readable, _, _ = select.select([self.connection], [], [], min(remaining, _POLL_S))
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                raise _ClientGone

    def _drop(self, drop: Drop) -> None:
        self.close_connection = True
        if drop.reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()


@pytest.fixture
def sse_server() -> Iterator[ScriptedServer]:
    """A running ScriptedServer for one test."""
    with ScriptedServer() as server:
        yield server


# ---------------------------------------------------------------------------------------
# Builders for the two wire formats.


def sse_event(data: str | Mapping[str, Any], event: str | None = None) -> bytes:
    """One server-sent event: an optional `event:` line, the data, a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines = [f"event: {event}"] if event else []
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def pieces(text: str, size: int) -> list[str]:
    """`text` cut into pieces of `size` characters (the deltas a model would stream)."""
    if size < 1:
        raise ValueError("size must be >= 1")
    return [text[i : i + size] for i in range(0, len(text), size)]


class Delivery(TypedDict, total=False):
    """How a built stream reaches the client, the same for both wire formats: the body
    re-split into writes of `wire_chunk_size` bytes, cut after `drop_after` events,
    `event_pause_s` between events, and extra `headers`."""

    wire_chunk_size: int | None
    drop_after: int | None
    event_pause_s: float
    headers: Mapping[str, str] | None


def openai_stream(
    text: str = "",
    *,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    usage: Mapping[str, Any] | None = None,
    finish: str | None = "stop",
    include_usage: bool = True,
    done: bool = True,
    model: str = "test-model",
    chunk_size: int = 7,
    **delivery: Unpack[Delivery],
) -> Reply:
    """A chat-completions stream as OpenAI sends it.

    A role chunk, the reasoning deltas (in `reasoning_field`), the content deltas of
    `chunk_size` characters, a chunk with `finish_reason`, the usage chunk (`usage`, by
    default counts derived from the text) and `data: [DONE]`.
    """
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: Mapping[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": dict(delta), "finish_reason": finish_reason}
        return sse_event({**base, "choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({reasoning_field: p}) for p in pieces(reasoning or "", chunk_size)]
    text_pieces = pieces(text, chunk_size)
    events += [chunk({"content": p}) for p in text_pieces]
    if finish is not None:
        events.append(chunk({}, finish))
    if include_usage:
        counts = usage or {
            "prompt_tokens": 11,
            "completion_tokens": len(text_pieces),
            "total_tokens": 11 + len(text_pieces),
        }
        events.append(sse_event({**base, "choices": [], "usage": dict(counts)}))
    if done:
        events.append(b"data: [DONE]\n\n")
    return _stream_reply(events, **delivery)


def anthropic_stream(
    text: str = "",
    *,
    thinking: str | None = None,
    signature: str | None = None,
    redacted: Sequence[str] = (),
    stop_reason: str | None = "end_turn",
    usage: Mapping[str, Any] | None = None,
    ping: bool = True,
    message_stop: bool = True,
    model: str = "test-model",
    chunk_size: int = 7,
    **delivery: Unpack[Delivery],
) -> Reply:
    """A Messages stream as Anthropic sends it, with `event:` lines.

    message_start (input usage), ping, a thinking block (thinking deltas, then one
    signature delta), one redacted_thinking block per `redacted` item, the text block,
    message_delta (stop_reason, output usage) and message_stop. `usage` takes Anthropic's
    field names; input and cache fields go in message_start, `output_tokens` in
    message_delta.
    """
    text_pieces = pieces(text, chunk_size)
    counts = dict(usage or {"input_tokens": 11, "output_tokens": len(text_pieces)})
    output_tokens = counts.pop("output_tokens", 0)
    start_usage = {"input_tokens": 0, "output_tokens": 1, **counts}
    message: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }

    def event(kind: str, **fields: Any) -> bytes:
        return sse_event({"type": kind, **fields}, event=kind)

    events = [event("message_start", message=message)]
    if ping:
        events.append(event("ping"))
    index = 0
    if thinking is not None or signature is not None:
        block = {"type": "thinking", "thinking": "", "signature": ""}
        events.append(event("content_block_start", index=index, content_block=block))
        for part in pieces(thinking or "", chunk_size):
            delta = {"type": "thinking_delta", "thinking": part}
            events.append(event("content_block_delta", index=index, delta=delta))
        if signature:
            delta = {"type": "signature_delta", "signature": signature}
            events.append(event("content_block_delta", index=index, delta=delta))
        events.append(event("content_block_stop", index=index))
        index += 1
    for data in redacted:
        block = {"type": "redacted_thinking", "data": data}
        events.append(event("content_block_start", index=index, content_block=block))
        events.append(event("content_block_stop", index=index))
        index += 1
    if text_pieces:
        block = {"type": "text", "text": ""}
        events.append(event("content_block_start", index=index, content_block=block))
        for part in text_pieces:
            delta = {"type": "text_delta", "text": part}
            events.append(event("content_block_delta", index=index, delta=delta))
        events.append(event("content_block_stop", index=index))
    if stop_reason is not None:
        events.append(
            event(
                "message_delta",
                delta={"stop_reason": stop_reason, "stop_sequence": None},
                usage={"output_tokens": output_tokens},
            )
        )
    if message_stop:
        events.append(event("message_stop"))
    return _stream_reply(events, **delivery)


def json_reply(body: Any, status: int = 200) -> Reply:
    """A JSON answer of `body`."""
    return Reply(
        status=status, headers=dict(_JSON_HEADERS), body=[json.dumps(body).encode()], chunked=False
    )


def json_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An OpenAI-style error answer: `{"error": {"message", "type", "code", "param"}}`."""
    body = {"error": {"message": message, "type": type, "code": code, "param": None}}
    return Reply(
        status=status,
        headers={**_JSON_HEADERS, **(headers or {})},
        body=[json.dumps(body).encode()],
        chunked=False,
    )


def anthropic_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An Anthropic-style error answer: `{"type": "error", "error": {"type", "message"}}`."""
    body = {"type": "error", "error": {"type": type, "message": message}}
    return Reply(
        status=status,
        headers={**_JSON_HEADERS, "request-id": "req_test", **(headers or {})},
        body=[json.dumps(body).encode()],
        chunked=False,
    )


def dropped_connection() -> Reply:
    """Close the connection after reading the request, before any byte of an answer."""
    return Reply(drop_before_response=True)


def _stream_reply(
    events: list[bytes],
    *,
    wire_chunk_size: int | None = None,
    drop_after: int | None = None,
    event_pause_s: float = 0.0,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    if drop_after is not None:
        events = events[:drop_after]
    steps: list[Step] = []
    if wire_chunk_size is not None:
        whole = b"".join(events)
        steps += [whole[i : i + wire_chunk_size] for i in range(0, len(whole), wire_chunk_size)]
    else:
        for index, encoded in enumerate(events):
            if index and event_pause_s:
                steps.append(Pause(event_pause_s))
            steps.append(encoded)
    if drop_after is not None:
        if event_pause_s:
            steps.append(Pause(event_pause_s))
        steps.append(Drop())
    return Reply(headers={**_SSE_HEADERS, **(headers or {})}, body=steps)
