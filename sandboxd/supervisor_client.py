"""The backend's end of one supervisor connection: many commands multiplexed on one socket.

The warm path of every sandboxed command goes through here, so it uses no thread and no
Docker API call: a JSON line out, a JSON line back. Replies come from inside the sandbox,
so they are validated and size-bounded like any untrusted input.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Literal

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandboxd.supervisor import HELLO, PROTOCOL

HELLO_TIMEOUT_S = 5.0
CANCEL_SEND_TIMEOUT_S = 1.0
MIN_REPLY_BYTES = 1024**2
JSON_EXPANSION = 6
"""Worst case bytes of JSON per byte of output (a control character becomes \\u00XX)."""

_STRICT = ConfigDict(extra="forbid", frozen=True)


class SupervisorHello(BaseModel):
    model_config = _STRICT

    hello: Literal["sandboxd-supervisor"]
    protocol: int
    pid: int
    shell: str


class RunMessage(BaseModel):
    model_config = _STRICT

    op: Literal["run"] = "run"
    id: int
    command: str
    env: dict[str, str]
    cwd: str
    timeout_s: float
    max_output_bytes: int
    max_saved_output_bytes: int


class SupervisorReply(BaseModel):
    model_config = _STRICT

    id: int
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    duration_s: float = Field(default=0.0, ge=0)
    stdout_dropped_bytes: int = Field(default=0, ge=0)
    stderr_dropped_bytes: int = Field(default=0, ge=0)
    stdout_file: str | None = None
    stderr_file: str | None = None
    oom_killed: bool = False
    error: str | None = None


@dataclass(frozen=True)
class ChannelLost:
    """No reply will come: the supervisor is gone or stopped answering."""

    reason: str
    by_backend: bool
    """True when the backend closed the channel on purpose (then `reason` is a sentence)."""


@dataclass
class _Waiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: SupervisorReply | None = None


class SupervisorChannel:
    """One container's supervisor connection, shared by all its concurrent commands."""

    def __init__(
        self, stream: anyio.abc.SocketStream, receive: BufferedByteReceiveStream, pid: int
    ) -> None:
        self._stream = stream
        self._receive = receive
        self.supervisor_pid = pid
        """The supervisor's pid inside the container."""
        self._ids = itertools.count(1)
        self._pending: dict[int, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._max_reply_bytes = MIN_REPLY_BYTES
        self._serve_scope: anyio.CancelScope | None = None
        self.lost_reason: str | None = None
        self._lost_by_backend = False

    @classmethod
    async def accept(cls, listener: anyio.abc.SocketListener) -> SupervisorChannel:
        """Take the supervisor's connection and its hello.

        Raises OSError, anyio stream errors or ValueError when the peer is not a supervisor
        of this protocol version.
        """
        stream = await listener.accept()
        try:
            receive = BufferedByteReceiveStream(stream)
            with anyio.fail_after(HELLO_TIMEOUT_S):
                line = await receive.receive_until(b"\n", 4096)
            hello = SupervisorHello.model_validate_json(line)
            if hello.protocol != PROTOCOL or hello.hello != HELLO:
                raise ValueError(
                    f"supervisor speaks protocol {hello.protocol}, this backend {PROTOCOL}"
                )
        except BaseException:
            await stream.aclose()
            raise
        return cls(stream, receive, hello.pid)

    async def serve(self) -> None:
        """Hand replies to their waiters until the connection ends, then fail the rest."""
        reason = "it closed the connection"
        try:
            with anyio.CancelScope() as self._serve_scope:
                while True:
                    line = await self._receive.receive_until(b"\n", self._max_reply_bytes)
                    reply = SupervisorReply.model_validate_json(line)
                    waiter = self._pending.pop(reply.id, None)
                    if waiter is not None:
                        waiter.reply = reply
                        waiter.done.set()
                    # WHY: held until the next reply, these would keep an idle sandbox's
                    # last output (up to ~150 MB as JSON and strings) in the daemon's memory.
                    del line, reply, waiter
        except (anyio.EndOfStream, anyio.IncompleteRead):
            pass
        except anyio.DelimiterNotFound:
            reason = f"it sent a reply over {self._max_reply_bytes} bytes"
        except ValidationError as exc:
            reason = f"it sent a malformed reply ({exc.errors()[0]['msg']})"
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            reason = f"the connection broke ({type(exc).__name__})"
        finally:
            self._lose(reason)
            await self.aclose()

    async def run(
        self, message: RunMessage, reply_deadline_s: float
    ) -> SupervisorReply | ChannelLost:
        """Send one command and wait for its reply; cancellation kills the command."""
        if self.lost_reason is not None:
            return self._lost()
        waiter = _Waiter()
        self._pending[message.id] = waiter
        # Output is bounded by the supervisor's capture; the reply line is bounded accordingly.
        bound = 2 * JSON_EXPANSION * (message.max_output_bytes + 256) + MIN_REPLY_BYTES
        self._max_reply_bytes = max(self._max_reply_bytes, bound)
        try:
            sent = await self._send(message.model_dump_json().encode() + b"\n")
            if sent:
                with anyio.move_on_after(reply_deadline_s):
                    await waiter.done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SEND_TIMEOUT_S):
                await self._send(b'{"op": "cancel", "id": %d}\n' % message.id)
            raise
        finally:
            self._pending.pop(message.id, None)
        if waiter.reply is not None:
            return waiter.reply
        if self.lost_reason is None:
            self._lose(f"it gave no reply within {reply_deadline_s:.0f} s")
            self._stop_serving()
        return self._lost()

    def next_id(self) -> int:
        return next(self._ids)

    def close(self, reason: str) -> None:
        """Stop serving: waiting commands get `reason` as their ChannelLost."""
        if self.lost_reason is None:
            self._lost_by_backend = True
        self._lose(reason)
        self._stop_serving()

    async def aclose(self) -> None:
        self._lose("the backend closed the connection")
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def _send(self, data: bytes) -> bool:
        try:
            async with self._send_lock:
                await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._lose(f"sending to it failed ({type(exc).__name__})")
            return False
        return True

    def _stop_serving(self) -> None:
        if self._serve_scope is not None:
            self._serve_scope.cancel()

    def _lost(self) -> ChannelLost:
        assert self.lost_reason is not None
        return ChannelLost(self.lost_reason, by_backend=self._lost_by_backend)

    def _lose(self, reason: str) -> None:
        if self.lost_reason is None:
            self.lost_reason = reason
        for waiter in self._pending.values():
            waiter.done.set()
        self._pending.clear()
