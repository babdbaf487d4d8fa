"""The backend's end of one supervisor connection: many commands multiplexed on one socket.

The warm path of every sandboxed command goes through here, so it uses no thread and no
Docker API call: a JSON line out, a JSON line and the raw output back. Replies come from
inside the sandbox, so they are validated and size-bounded like any untrusted input: each
reply's output may not exceed what its own request allows.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from logos.result import Result
from sandboxd.supervisor import HELLO, PROTOCOL

HELLO_TIMEOUT_S = 5.0
CANCEL_SEND_TIMEOUT_S = 1.0
MAX_HELLO_BYTES = 64 * 1024
MAX_REPLY_HEAD_BYTES = 64 * 1024
"""A reply's JSON line (its output follows it, counted separately)."""
UTF8_EXPANSION = 3
"""Worst case bytes of UTF-8 per byte of captured output (an invalid byte becomes U+FFFD)."""
MARKER_BYTES = 256
"""Room for the omission marker a cut output carries."""

_STRICT = ConfigDict(extra="forbid", frozen=True)


class MountSeen(BaseModel):
    """What the supervisor found at one mount root: its identity, or why it could not look."""

    model_config = _STRICT

    device: int | None = None
    inode: int | None = None
    kind: Literal["directory", "file", "other"] | None = None
    direct: bool = False
    """Reaching the path followed no symlink (inside the container)."""
    error: str | None = None


class SupervisorHello(BaseModel):
    model_config = _STRICT

    hello: Literal["sandboxd-supervisor"]
    protocol: int
    pid: int
    shell: str
    mounts: list[MountSeen]
    """One per mount root the backend asked about, in its order."""
    unix_sockets: str
    """"denied", "allowed", or "not denied: <why>" when the filter could not be installed."""


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


class ReplyHead(BaseModel):
    """A reply's JSON line; `stdout_bytes` + `stderr_bytes` of raw UTF-8 follow it."""

    model_config = _STRICT

    id: int
    stdout_bytes: int = Field(default=0, ge=0)
    stderr_bytes: int = Field(default=0, ge=0)
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


class SupervisorReply(ReplyHead):
    """A whole reply: its line's fields and the output that followed it."""

    stdout: str = ""
    stderr: str = ""

    def to_result(self, command: str) -> Result:
        """The command's Result: a reply has each of its fields, by the same names."""
        return Result(command=command, **{name: getattr(self, name) for name in _RESULT_FIELDS})


_RESULT_FIELDS = tuple(
    result_field.name
    for result_field in dataclasses.fields(Result)
    if result_field.name not in ("command", "job")  # the daemon names jobs, not the sandbox
)


def output_bound(max_output_bytes: int) -> int:
    """The most bytes one stream of a reply may carry for a request with this limit."""
    return UTF8_EXPANSION * max_output_bytes + MARKER_BYTES


@dataclass(frozen=True)
class ChannelLost:
    """No reply will come: the supervisor is gone or stopped answering."""

    reason: str
    by_backend: bool
    """True when the backend closed the channel on purpose (then `reason` is a sentence)."""


class _BadReply(Exception):
    """The supervisor broke the protocol; the message says how."""


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
        self._bounds: dict[int, int] = {}
        """Per command sent and not yet answered: the most output bytes a stream may carry.
        Kept after a cancel, whose reply still comes."""
        self._send_lock = anyio.Lock()
        self._serve_scope: anyio.CancelScope | None = None
        self.lost_reason: str | None = None
        self._lost_by_backend = False

    @classmethod
    async def accept(
        cls, listener: anyio.abc.SocketListener
    ) -> tuple[SupervisorChannel, SupervisorHello]:
        """Take the supervisor's connection and its hello.

        Raises OSError, anyio stream errors or ValueError when the peer is not a supervisor
        of this protocol version.
        """
        stream = await listener.accept()
        try:
            receive = BufferedByteReceiveStream(stream)
            with anyio.fail_after(HELLO_TIMEOUT_S):
                line = await receive.receive_until(b"\n", MAX_HELLO_BYTES)
            hello = SupervisorHello.model_validate_json(line)
            if hello.protocol != PROTOCOL or hello.hello != HELLO:
                raise ValueError(
                    f"supervisor speaks protocol {hello.protocol}, this backend {PROTOCOL}"
                )
        except BaseException:
            await stream.aclose()
            raise
        return cls(stream, receive, hello.pid), hello

    async def serve(self) -> None:
        """Hand replies to their waiters until the connection ends, then fail the rest."""
        reason = "it closed the connection"
        try:
            with anyio.CancelScope() as self._serve_scope:
                while True:
                    reply = await self._receive_reply()
                    waiter = self._pending.pop(reply.id, None)
                    if waiter is not None:
                        waiter.reply = reply
                        waiter.done.set()
                    # WHY: held until the next reply, these would keep an idle sandbox's
                    # last output (as large as its request allowed) in the daemon's memory.
                    del reply, waiter
        except (anyio.EndOfStream, anyio.IncompleteRead):
            pass
        except anyio.DelimiterNotFound:
            reason = f"it sent a reply line over {MAX_REPLY_HEAD_BYTES} bytes"
        except _BadReply as exc:
            reason = str(exc)
        except ValidationError as exc:
            reason = f"it sent a malformed reply ({exc.errors()[0]['msg']})"
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            reason = f"the connection broke ({type(exc).__name__})"
        finally:
            self._lose(reason)
            await self.aclose()

    async def _receive_reply(self) -> SupervisorReply:
        line = await self._receive.receive_until(b"\n", MAX_REPLY_HEAD_BYTES)
        head = ReplyHead.model_validate_json(line)
        bound = self._bounds.pop(head.id, None)
        if bound is None:
            raise _BadReply(f"it answered command {head.id}, which was never sent")
        for name, size in (("stdout", head.stdout_bytes), ("stderr", head.stderr_bytes)):
            if size > bound:
                raise _BadReply(
                    f"it sent {size} bytes of {name} for command {head.id}, more than the "
                    f"{bound} its request allows"
                )
        out = await self._receive.receive_exactly(head.stdout_bytes) if head.stdout_bytes else b""
        err = await self._receive.receive_exactly(head.stderr_bytes) if head.stderr_bytes else b""
        fields: dict[str, Any] = dict(head)
        fields["stdout"] = out.decode("utf-8", "replace")
        fields["stderr"] = err.decode("utf-8", "replace")
        # WHY construct: the head was validated, and the output is text by construction.
        return SupervisorReply.model_construct(**fields)

    async def run(
        self, message: RunMessage, reply_deadline_s: float
    ) -> SupervisorReply | ChannelLost:
        """Send one command and wait for its reply; cancellation kills the command."""
        if self.lost_reason is not None:
            return self._lost()
        waiter = _Waiter()
        self._pending[message.id] = waiter
        # WHY set before sending: the reply may arrive before this task runs again.
        self._bounds[message.id] = output_bound(message.max_output_bytes)
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
