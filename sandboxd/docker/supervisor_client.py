"""The backend's end of one supervisor channel: many commands multiplexed on one FIFO pair.

The warm path of every sandboxed command goes through here, so it uses no thread and no
Docker API call: a JSON line out, a JSON line and the raw output back. Replies come from
inside the sandbox, so they are validated and size-bounded like any untrusted input: each
reply's output may not exceed what its own request allows, and each kind of reply must be
one the backend can be waiting for: a "background" reply only for a command that asked for
one, once; an "output" reply only for a peek the backend sent; "live" replies only for a
command that asked to be watched, until it ends or goes on as a job, each within a piece's
bound and all of them within the command's live limit (logos.runners.live); one "end" per
command, with no output for a job (whose output is asked for with a peek).
"""

from __future__ import annotations

import dataclasses
import hmac
import itertools
import json
import os
import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from logos.result import Result
from logos.runners.live import LIMIT_BYTES, PIECE_BYTES, LiveOutput
from sandboxd.docker.fifo import FifoPair, unlink
from sandboxd.inside.supervisor import (
    HELLO,
    IN_FIFO,
    OUT_FIFO,
    PROTOCOL,
    REJOIN_DIR,
    rejoin_names,
    rejoin_proof,
)

_HELLO_TIMEOUT_S = 5.0
REJOIN_TIMEOUT_S = 5.0
"""How long a supervisor that waits for a daemon (it looks every REJOIN_POLL_S) is given to
open a new channel's FIFOs: one that does not is not waiting (gone, or frozen)."""
_CANCEL_SEND_TIMEOUT_S = 1.0
_MAX_HELLO_BYTES = 1024 * 1024
"""A rejoined channel's hello lists the jobs it holds (up to the supervisor's
MAX_KEPT_OUTPUTS ended ones, and those running)."""
_MAX_REPLY_HEAD_BYTES = 64 * 1024
"""A reply's JSON line (its output follows it, counted separately)."""
_UTF8_EXPANSION = 3
"""Worst case bytes of UTF-8 per byte of captured output (an invalid byte becomes U+FFFD)."""
_MARKER_BYTES = 256
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


class EgressRequest(BaseModel):
    """A line from the supervisor that is no reply: its forwarder wants a FIFO pair for a new
    connection (sandboxd.inside.egress_forwarder)."""

    model_config = _STRICT

    egress: int = Field(ge=1)


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
    background_after_s: float | None = None
    """A command still running then goes on as a job (a "background" reply, then its end)."""
    live: bool = False
    """Send "live" replies while it runs (see the supervisor's docstring)."""


ReplyPhase = Literal["background", "output", "live", "end"]


class ReplyHead(BaseModel):
    """A reply's JSON line; `stdout_bytes` + `stderr_bytes` of raw UTF-8 follow it."""

    model_config = _STRICT

    id: int
    phase: ReplyPhase = "end"
    """"background": the command went on as a job (its output so far follows); "output":
    the answer to a peek; "live": what it printed lately; "end": how the command ended."""
    running: bool = False
    """In an "output" reply: whether the command still runs."""
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
    stdout_skipped_bytes: int = Field(default=0, ge=0)
    """In a "live" reply: bytes printed before its stdout that it does not carry."""
    stderr_skipped_bytes: int = Field(default=0, ge=0)
    last: bool = False
    """In a "live" reply: no more come for this command."""


class SupervisorReply(ReplyHead):
    """A whole reply: its line's fields and the output that followed it."""

    stdout: str = ""
    stderr: str = ""

    def to_result(self, command: str) -> Result:
        """The command's Result: a reply has each of its fields, by the same names."""
        return Result(command=command, **{name: getattr(self, name) for name in _RESULT_FIELDS})


class HeldJob(BaseModel):
    """A job a supervisor holds, as a rejoined channel's hello lists it."""

    model_config = _STRICT

    id: int
    started_at: float
    """Unix time its command started."""
    timeout_s: float
    max_output_bytes: int = Field(ge=0)
    end: ReplyHead | None = None
    """Its end reply (no output follows it), once it ended."""


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
    egress: str = "off"
    """"off", "ready" (the forwarder to the egress proxy listens), or why it could not."""
    secret: str | None = None
    """In a first hello: what a daemon must know to reach the supervisor again once the
    backend is gone (kept 0600 in the daemon's state directory)."""
    rejoined: bool = False
    """A daemon's new channel to a supervisor that waited for one (see `rejoin`)."""
    proof: str | None = None
    """In a rejoined hello: sandboxd.inside.supervisor.rejoin_proof of the secret."""
    jobs: list[HeldJob] = Field(default_factory=list)
    """In a rejoined hello: the jobs the supervisor holds."""
    last_id: int = 0
    """In a rejoined hello: the highest request id it saw (the channel numbers after it)."""
    last_active: float | None = None
    """In a rejoined hello: Unix time a request last came or a command last ended."""


_RESULT_FIELDS = tuple(
    result_field.name
    for result_field in dataclasses.fields(Result)
    # The daemon names jobs and what its egress proxy blocked, not the sandbox.
    if result_field.name not in ("command", "job", "blocked")
)


def _output_bound(max_output_bytes: int) -> int:
    """The most bytes one stream of a reply may carry for a request with this limit."""
    return _UTF8_EXPANSION * max_output_bytes + _MARKER_BYTES


LIVE_PIECE_BOUND = _UTF8_EXPANSION * PIECE_BYTES
"""The most bytes one stream of a "live" reply may carry."""
LIVE_TOTAL_BOUND = _UTF8_EXPANSION * LIMIT_BYTES
"""The most bytes all "live" replies about one command may carry together."""


@dataclass(frozen=True)
class ChannelLost:
    """No reply will come: the supervisor is gone or stopped answering."""

    reason: str
    by_backend: bool
    """True when the backend closed the channel on purpose (then `reason` is a sentence)."""


class _BadReply(Exception):
    """The supervisor broke the protocol; the message says how."""


@dataclass(eq=False)
class _Sent:
    """A command sent to the supervisor, until its end came (or, for a job, it was forgotten)."""

    bound: int
    """The most output bytes one stream of a reply about it may carry."""
    may_background: bool
    first: anyio.Event = field(default_factory=anyio.Event)
    """Its first reply came: "background" or "end"."""
    ended: anyio.Event = field(default_factory=anyio.Event)
    first_reply: SupervisorReply | None = None
    end_reply: SupervisorReply | None = None
    backgrounded: bool = False
    abandoned: bool = False
    """Its caller went away (cancelled): nothing will forget it if it becomes a job."""
    forgotten: bool = False
    """The backend forgot the job before its end came: the supervisor is told at its end."""
    peeks: deque[_Peek] = field(default_factory=deque)
    live: LiveOutput | None = None
    """Where its "live" replies go; None: it did not ask for them."""
    live_bytes: int = 0


@dataclass(eq=False)
class _Peek:
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: SupervisorReply | None = None


EgressHandler = Callable[[int], Awaitable[bool]]
"""Makes the FIFO pair for egress connection N and serves it; whether it could."""


class SupervisorChannel:
    """One container's supervisor channel, shared by all its concurrent commands."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        receive: BufferedByteReceiveStream,
        pid: int,
        first_id: int = 1,
    ) -> None:
        self._stream = stream
        self._receive = receive
        self.supervisor_pid = pid
        """The supervisor's pid inside the container."""
        self._ids = itertools.count(first_id)
        self._sent: dict[int, _Sent] = {}
        """Per command sent: what a reply about it may be. A command's entry stays after a
        cancel, whose reply still comes, and a job's until it is forgotten."""
        self._send_lock = anyio.Lock()
        self._serve_scope: anyio.CancelScope | None = None
        self.lost_reason: str | None = None
        self._lost_by_backend = False
        self.on_egress: EgressHandler | None = None
        """Serves the forwarder's requests; None: a request is a protocol error."""
        self._tasks: anyio.abc.TaskGroup | None = None
        """While served: what the channel sends on its own (egress answers, late forgets)."""
        self.held: list[HeldJob] = []
        """The jobs a rejoined supervisor held (followed as if sent on this channel)."""

    @classmethod
    async def handshake(
        cls, stream: anyio.abc.ByteStream, secret: str | None = None
    ) -> tuple[SupervisorChannel, SupervisorHello]:
        """The supervisor's hello on a new channel; the stream is closed if it fails. With
        `secret`: a channel to a supervisor that waited for a daemon (see REJOIN_DIR), whose
        hello must prove that secret; the jobs it holds are carried over, and requests are
        numbered after the last it saw.

        Raises OSError, anyio stream errors or ValueError when the peer is not a supervisor
        of this protocol version (or not the one that holds `secret`).
        """
        try:
            receive = BufferedByteReceiveStream(stream)
            with anyio.fail_after(_HELLO_TIMEOUT_S):
                line = await receive.receive_until(b"\n", _MAX_HELLO_BYTES)
            hello = SupervisorHello.model_validate_json(line)
            if hello.protocol != PROTOCOL or hello.hello != HELLO:
                raise ValueError(
                    f"supervisor speaks protocol {hello.protocol}, this backend {PROTOCOL}"
                )
            if hello.rejoined != (secret is not None):
                raise ValueError("the supervisor's hello is not the one this channel awaits")
            if secret is not None and not hmac.compare_digest(
                hello.proof or "", rejoin_proof(secret)
            ):
                raise ValueError("the supervisor's hello does not prove the sandbox's secret")
        except BaseException:
            await stream.aclose()
            raise
        channel = cls(stream, receive, hello.pid, first_id=hello.last_id + 1)
        try:
            for job in hello.jobs:
                channel._hold(job)
        except ValueError:
            await stream.aclose()
            raise
        channel.held = list(hello.jobs)
        return channel, hello

    def _hold(self, job: HeldJob) -> None:
        """A job the supervisor held while no daemon was there: followed as if this channel
        had sent it (its end, if it came, is already known)."""
        sent = _Sent(_output_bound(job.max_output_bytes), may_background=False)
        sent.backgrounded = True
        if job.end is not None:
            if (job.end.id, job.end.phase) != (job.id, "end"):
                raise ValueError(f"the supervisor's hello holds job {job.id} with another's end")
            end = dict(job.end)
            sent.end_reply = SupervisorReply.model_construct(**end, stdout="", stderr="")
            sent.ended.set()
        self._sent[job.id] = sent

    async def serve(self) -> None:
        """Hand replies to their waiters until the channel ends, then fail the rest."""
        async with anyio.create_task_group() as self._tasks:
            await self._serve_replies()
            self._tasks.cancel_scope.cancel()

    async def _serve_replies(self) -> None:
        reason = "it closed the connection"
        try:
            with anyio.CancelScope() as self._serve_scope:
                while True:
                    # WHY no local name for the reply: it would keep the last one (as large
                    # as its request allowed) alive while the channel waits for the next.
                    self._deliver(await self._receive_reply())
        except (anyio.EndOfStream, anyio.IncompleteRead):
            pass
        except anyio.DelimiterNotFound:
            reason = f"it sent a reply line over {_MAX_REPLY_HEAD_BYTES} bytes"
        except _BadReply as exc:
            reason = str(exc)
        except ValidationError as exc:
            reason = f"it sent a malformed reply ({exc.errors()[0]['msg']})"
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            reason = f"the connection broke ({type(exc).__name__})"
        finally:
            self._lose(reason)
            await self.aclose()

    async def _receive_reply(self) -> SupervisorReply | None:
        """The next reply; None for a line that was the forwarder's request (served)."""
        line = await self._receive.receive_until(b"\n", _MAX_REPLY_HEAD_BYTES)
        if line.startswith(b'{"egress"'):
            self._serve_egress(EgressRequest.model_validate_json(line).egress)
            return None
        head = ReplyHead.model_validate_json(line)
        sent = self._sent.get(head.id)
        if sent is None:
            raise _BadReply(f"it answered command {head.id}, which was never sent")
        self._check_phase(head, sent)
        bound = LIVE_PIECE_BOUND if head.phase == "live" else sent.bound
        for name, size in (("stdout", head.stdout_bytes), ("stderr", head.stderr_bytes)):
            if size > bound:
                raise _BadReply(
                    f"it sent {size} bytes of {name} for command {head.id}, more than the "
                    f"{bound} its request allows"
                )
        if head.phase == "live":
            sent.live_bytes += head.stdout_bytes + head.stderr_bytes
            if sent.live_bytes > LIVE_TOTAL_BOUND:
                raise _BadReply(
                    f"it sent over {LIVE_TOTAL_BOUND} bytes of live output for command {head.id}"
                )
        out = await self._receive.receive_exactly(head.stdout_bytes) if head.stdout_bytes else b""
        err = await self._receive.receive_exactly(head.stderr_bytes) if head.stderr_bytes else b""
        fields: dict[str, Any] = dict(head)
        fields["stdout"] = out.decode("utf-8", "replace")
        fields["stderr"] = err.decode("utf-8", "replace")
        # WHY construct: the head was validated, and the output is text by construction.
        return SupervisorReply.model_construct(**fields)

    def _serve_egress(self, number: int) -> None:
        if self.on_egress is None:
            raise _BadReply("it asked for an egress connection, which this sandbox has not")
        handler = self.on_egress
        assert self._tasks is not None

        async def open_and_answer() -> None:
            ready = await handler(number)
            answer = {"op": "egress", "id": number, "ready": ready}
            await self._send(json.dumps(answer).encode() + b"\n")

        self._tasks.start_soon(open_and_answer)

    @staticmethod
    def _check_phase(head: ReplyHead, sent: _Sent) -> None:
        """A reply must be one the backend can be waiting for (before its output is read)."""
        if head.phase == "background" and not (
            sent.may_background and not sent.backgrounded and not sent.ended.is_set()
        ):
            raise _BadReply(f"it moved command {head.id} to the background unasked")
        if head.phase == "output" and not sent.peeks:
            raise _BadReply(f"it sent output of command {head.id}, which was not asked for")
        if head.phase == "live" and (sent.live is None or sent.backgrounded or sent.ended.is_set()):
            raise _BadReply(f"it sent live output of command {head.id}, which was not asked for")
        if head.phase == "end":
            if sent.ended.is_set():
                raise _BadReply(f"it ended command {head.id} twice")
            if sent.backgrounded and (head.stdout_bytes or head.stderr_bytes):
                raise _BadReply(f"it sent output with the end of job {head.id}")

    def _deliver(self, reply: SupervisorReply | None) -> None:
        if reply is None:  # the forwarder's request, served
            return
        sent = self._sent[reply.id]
        if reply.phase == "live":
            if sent.live is not None and not sent.abandoned:
                sent.live.write("stdout", reply.stdout.encode(), reply.stdout_skipped_bytes)
                sent.live.write("stderr", reply.stderr.encode(), reply.stderr_skipped_bytes)
            return
        if reply.phase == "output":
            peek = sent.peeks.popleft()
            peek.reply = reply
            peek.done.set()
            return
        if reply.phase == "background":
            sent.backgrounded = True
        else:
            sent.end_reply = reply
            sent.ended.set()
            if not sent.backgrounded or sent.abandoned or sent.forgotten:
                # WHY now: held until forgotten, its output (as large as its request
                # allowed) would stay in the daemon's memory; its waiter has it.
                del self._sent[reply.id]
            if sent.forgotten and self._tasks is not None:
                self._tasks.start_soon(self._send_forget, reply.id)
        if not sent.first.is_set():
            sent.first_reply = reply
            sent.first.set()

    async def run(
        self,
        message: RunMessage,
        reply_deadline_s: float,
        live: LiveOutput | None = None,
    ) -> SupervisorReply | ChannelLost:
        """Send one command and wait for its first reply: its end, or (a job) its
        "background" reply; cancellation kills the command. With `live` (and a message
        that asks for it), what the command prints meanwhile goes there."""
        if self.lost_reason is not None:
            return self._lost()
        sent = _Sent(
            _output_bound(message.max_output_bytes),
            may_background=message.background_after_s is not None,
            live=live if message.live else None,
        )
        # WHY registered before sending: the reply may arrive before this task runs again.
        self._sent[message.id] = sent
        try:
            if await self._send(message.model_dump_json().encode() + b"\n"):
                with anyio.move_on_after(reply_deadline_s):
                    await sent.first.wait()
        except anyio.get_cancelled_exc_class():
            sent.abandoned = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_SEND_TIMEOUT_S):
                await self._send(b'{"op": "cancel", "id": %d}\n' % message.id)
            raise
        reply, sent.first_reply = sent.first_reply, None
        return self._silent(reply_deadline_s) if reply is None else reply

    async def wait_end(self, command_id: int, deadline_s: float) -> SupervisorReply | ChannelLost:
        """A job's end (it carries no output: `peek` for that)."""
        sent = self._sent.get(command_id)
        if sent is None or self.lost_reason is not None:
            return self._lost() if self.lost_reason is not None else _unknown(command_id)
        with anyio.move_on_after(deadline_s):
            await sent.ended.wait()
        return self._silent(deadline_s) if sent.end_reply is None else sent.end_reply

    async def peek(
        self, command_id: int, since_background: bool, deadline_s: float
    ) -> SupervisorReply | ChannelLost:
        """A job's output so far, or once it ended its last; `since_background`: without
        what its "background" reply showed."""
        sent = self._sent.get(command_id)
        if sent is None or self.lost_reason is not None:
            return self._lost() if self.lost_reason is not None else _unknown(command_id)
        peek = _Peek()
        sent.peeks.append(peek)
        request = {"op": "peek", "id": command_id, "since_background": since_background}
        # A peek given up (cancelled) stays queued: its reply still comes, and goes there.
        if await self._send(json.dumps(request).encode() + b"\n"):
            with anyio.move_on_after(deadline_s):
                await peek.done.wait()
        return self._silent(deadline_s) if peek.reply is None else peek.reply

    async def kill(self, command_id: int) -> None:
        """Stop a job (its end follows)."""
        await self._send(b'{"op": "kill", "id": %d}\n' % command_id)

    async def forget(self, command_id: int) -> None:
        """The backend is done with a job: the supervisor may drop its output (once the job
        ended: its end, which still comes, is expected until then)."""
        sent = self._sent.get(command_id)
        if sent is None:
            return
        if not sent.ended.is_set():
            sent.forgotten = True
            return
        del self._sent[command_id]
        await self._send_forget(command_id)

    async def _send_forget(self, command_id: int) -> None:
        if self.lost_reason is None:
            with anyio.move_on_after(_CANCEL_SEND_TIMEOUT_S):
                await self._send(b'{"op": "forget", "id": %d}\n' % command_id)

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
        """Send `data`; False when the channel is lost."""
        try:
            async with self._send_lock:
                await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._lose(f"sending to it failed ({type(exc).__name__})")
            return False
        return True

    def _silent(self, deadline_s: float) -> ChannelLost:
        """No reply came in time (or the channel was lost meanwhile)."""
        if self.lost_reason is None:
            self._lose(f"it gave no reply within {deadline_s:.0f} s")
            self._stop_serving()
        return self._lost()

    def _stop_serving(self) -> None:
        if self._serve_scope is not None:
            self._serve_scope.cancel()

    def _lost(self) -> ChannelLost:
        assert self.lost_reason is not None
        return ChannelLost(self.lost_reason, by_backend=self._lost_by_backend)

    def _lose(self, reason: str) -> None:
        if self.lost_reason is None:
            self.lost_reason = reason
        for sent in self._sent.values():
            sent.first.set()
            sent.ended.set()
            for peek in sent.peeks:
                peek.done.set()
        self._sent.clear()


class ChannelFifos:
    """The supervisor's two FIFOs (`in`, `out`), made and opened on the host before its
    container starts (sandboxd.docker.fifo); or, for a supervisor that waits for a daemon,
    before they appear in its REJOIN_DIR (`rejoin`)."""

    def __init__(self, pair: FifoPair, secret: str | None = None) -> None:
        self._pair: FifoPair | None = pair
        self._secret = secret

    @classmethod
    def make(cls, control_dir: Path, uid: int, gid: int) -> ChannelFifos:
        return cls(FifoPair.make(control_dir / OUT_FIFO, control_dir / IN_FIFO, uid, gid))

    @classmethod
    def rejoin(cls, control_dir: Path, secret: str, uid: int, gid: int) -> ChannelFifos:
        """A new channel to the supervisor that holds `secret`: its FIFOs made and opened
        under names of no meaning, then renamed to those the secret gives (`in` first): once
        the supervisor finds `out`, both are there and this end holds them. Raises OSError."""
        directory = control_dir / REJOIN_DIR
        in_name, out_name = rejoin_names(secret)
        unlink(directory / in_name, directory / out_name)  # a daemon's that died meanwhile
        spare = secrets.token_hex(8)
        made = FifoPair.make(directory / f"{spare}.out", directory / f"{spare}.in", uid, gid)
        try:
            os.rename(made.paths[1], directory / in_name)
            os.rename(made.paths[0], directory / out_name)
        except BaseException:
            for fd in made.stream.detach():
                if fd is not None:
                    os.close(fd)
            unlink(*made.paths, directory / in_name, directory / out_name)
            raise
        return cls(FifoPair((directory / out_name, directory / in_name), made.stream), secret)

    async def handshake(self) -> tuple[SupervisorChannel, SupervisorHello]:
        """The channel, once the supervisor said hello (it opened both FIFOs before): the
        channel owns the FIFOs from then on. Waits as long as the caller lets it for the
        supervisor to start; then its hello must come within HELLO_TIMEOUT_S."""
        pair, self._pair = self._pair, None
        assert pair is not None, "a channel's FIFOs shake hands once"
        try:
            await pair.stream.wait_heard()
        except BaseException:
            await pair.aclose()
            raise
        channel, hello = await SupervisorChannel.handshake(pair.stream, self._secret)
        try:
            pair.settle()
        except OSError:
            await channel.aclose()
            raise
        return channel, hello

    async def aclose(self) -> None:
        """Unless a channel took them over."""
        if self._pair is not None:
            await self._pair.aclose()


def _unknown(command_id: int) -> ChannelLost:
    return ChannelLost(f"command {command_id} is not known to this sandbox", by_backend=True)
