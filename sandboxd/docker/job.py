"""A job in a supervised container: a command its supervisor keeps running past its
background answer, followed until its end, its output asked for on demand.

The daemon holds only the job's status: its output stays in the container (in the
supervisor's memory, under the container's limit, and in its copies) until the daemon
forgets the job, so a caller's jobs cost the daemon no output memory while nobody reads it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import anyio

from logos.result import Result
from sandboxd.backend import JobKey
from sandboxd.docker.supervisor_client import ChannelLost, SupervisorChannel

_PEEK_DEADLINE_S = 30.0
"""How long a silent supervisor is trusted with a peek before its container is given up."""


class SupervisedJob:
    """One job of one container's supervisor (a `sandboxd.backend.BackendJob`)."""

    def __init__(
        self,
        channel: SupervisorChannel,
        key: JobKey,
        command: str,
        *,
        end_deadline: float,
        lost_message: Callable[[ChannelLost], str],
    ) -> None:
        """`key`: its sandbox and its command's id on `channel`; `end_deadline`: monotonic
        time by which its end must have come (its timeout, the kill grace and a margin after
        its start); `lost_message`: what a lost channel means to the caller."""
        self._channel = channel
        self._key = key
        self._id = key.number
        self._command = command
        self._end_deadline = end_deadline
        self._lost_message = lost_message
        self._ended = anyio.Event()
        self._end: Result | None = None
        self._ended_at: float | None = None

    @property
    def key(self) -> JobKey:
        return self._key

    @property
    def end(self) -> Result | None:
        return self._end

    @property
    def ended_at(self) -> float | None:
        return self._ended_at

    async def follow(self) -> None:
        """Wait for its end (run by the backend while the job lives)."""
        reply = await self._channel.wait_end(
            self._id, max(self._end_deadline - time.monotonic(), 0.0)
        )
        if isinstance(reply, ChannelLost):
            self._end = Result(command=self._command, error=self._lost_message(reply))
        else:
            self._end = reply.to_result(self._command)
        self._ended_at = time.time()
        self._ended.set()

    async def wait(self) -> None:
        await self._ended.wait()

    async def output(self, since_background: bool) -> Result:
        status = self._end if self._end is not None else Result(command=self._command)
        reply = await self._channel.peek(self._id, since_background, _PEEK_DEADLINE_S)
        if isinstance(reply, ChannelLost):
            gone = f"its output is no longer available: {self._lost_message(reply)}"
            return replace(status, error=status.error or gone)
        if reply.error is not None:
            return replace(status, error=status.error or f"its output is gone: {reply.error}")
        return replace(
            status,
            stdout=reply.stdout,
            stderr=reply.stderr,
            stdout_dropped_bytes=reply.stdout_dropped_bytes,
            stderr_dropped_bytes=reply.stderr_dropped_bytes,
            stdout_file=reply.stdout_file,
            stderr_file=reply.stderr_file,
        )

    async def kill(self) -> None:
        await self._channel.kill(self._id)

    async def forget(self) -> None:
        await self._channel.forget(self._id)
