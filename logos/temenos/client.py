"""The HTTP client of one temenos daemon: its requests, answers read within a bound, and
every failure said in words (`TemenosFailure`), with what to do. Once the daemon has
answered, a request whose connection is refused (the daemon is restarting) is sent again for
a while (logos.runners.restarts): it reached no daemon, so nothing runs twice."""

from __future__ import annotations

import contextlib
from typing import TypeVar

import anyio
import httpx
from pydantic import BaseModel, ValidationError

from logos.runners.restarts import RESTART_WAIT_S, never_reached, through_restart
from logos.temenos import api as wire
from logos.temenos.address import TemenosAddress

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
"""For the short requests: a job's state, a kill, the health check."""
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The most of one answer the client reads: temenos cuts outputs at 64 KiB, sandboxd at the
request's cap; more than this is a broken or hostile daemon, not a command's output."""

_Answer = TypeVar("_Answer", bound=BaseModel)


class TemenosFailure(Exception):
    """A request that did not get a usable answer; the message says what and what to do."""


class JobNotFound(TemenosFailure):
    """The daemon does not know the job (404): it restarted, or forgot the job."""


class TemenosClient:
    """Requests to the daemon at `address`, until `aclose()`."""

    def __init__(self, address: TemenosAddress, *, restart_wait_s: float = RESTART_WAIT_S) -> None:
        self.address = address
        self.restart_wait_s = restart_wait_s
        """How long a daemon that answered once and went away is waited for."""
        self.closed = False
        self._reached = False
        """The daemon answered once: a refused connection now is a restart."""
        self._http = address.async_client(
            httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        )

    async def run(self, content: str, answer_within_s: float) -> wire.RunResponse:
        """POST /run with an already serialised body."""
        return await self._send(
            "POST", "/run", wire.RunResponse, content=content, answer_within_s=answer_within_s
        )

    async def job(self, job_id: str) -> wire.JobInfo:
        """GET /jobs/{id}: the job's state and its output so far."""
        return await self._send("GET", f"/jobs/{job_id}", wire.JobInfo)

    async def kill(self, job_id: str) -> wire.JobInfo | None:
        """DELETE /jobs/{id}, within a bound; the job's final state, or None when that failed
        (it had ended already, or the daemon is gone: nothing is left to kill either way)."""
        with anyio.move_on_after(REQUEST_TIMEOUT_S):
            with contextlib.suppress(TemenosFailure):
                return await self._send("DELETE", f"/jobs/{job_id}", wire.JobInfo)
        return None

    async def aclose(self) -> None:
        self.closed = True
        await self._http.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        shape: type[_Answer],
        *,
        content: str | None = None,
        answer_within_s: float = REQUEST_TIMEOUT_S,
    ) -> _Answer:
        """One request, its answer read (bounded) and checked against `shape`."""
        headers = {"content-type": "application/json"} if content is not None else {}

        async def send() -> httpx.Response:
            request = self._http.build_request(
                method,
                path,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(answer_within_s, connect=CONNECT_TIMEOUT_S),
            )
            return await self._http.send(request, stream=True)

        try:
            response = await through_restart(
                send,
                again=lambda exc: self._reached and never_reached(exc),
                wait_s=self.restart_wait_s,
            )
            self._reached = True
            try:
                body = await _read_bounded(response)
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            problem = self._transport_problem(exc, method, path, answer_within_s)
            raise TemenosFailure(problem) from None
        except RuntimeError:
            if self.closed:  # closed under a request in flight
                raise TemenosFailure("the runner was closed while the command ran") from None
            raise
        if response.status_code == 404 and path.startswith("/jobs/"):
            raise JobNotFound(
                f"the temenos daemon at {self.address} no longer knows job "
                f"{path.removeprefix('/jobs/')} (it restarted, or dropped the job): how the "
                "command ended is unknown"
            )
        if response.status_code != 200:
            raise TemenosFailure(self._refusal(response.status_code, body))
        try:
            return shape.model_validate_json(body)
        except ValidationError:
            raise TemenosFailure(
                f"something at {self.address} answered {method} {path} with what is not a "
                "temenos answer: check the address (is it a temenos daemon, or sandboxd's "
                "socket?)"
            ) from None

    def _refusal(self, status: int, body: bytes) -> str:
        try:
            message = wire.ErrorResponse.model_validate_json(body).message()
        except ValidationError:
            message = body.decode("utf-8", "replace").strip() or "no details"
        return f"the temenos daemon at {self.address} refused (HTTP {status}): {message[:1000]}"

    def _transport_problem(
        self, exc: httpx.TransportError, method: str, path: str, answer_within_s: float
    ) -> str:
        where = self.address
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return (
                f"cannot reach a temenos daemon at {where} ({_reason(exc)}): start it "
                "(`temenos daemon`), or point --sandbox-addr / $TEMENOS_LISTEN_ADDR / "
                "$TEMENOS_SOCKET_PATH at it"
            )
        if isinstance(exc, httpx.TimeoutException):
            return (
                f"the temenos daemon at {where} did not answer {method} {path} within "
                f"{answer_within_s:g} s: check the daemon's log"
            )
        if isinstance(exc, _TooLarge):
            return str(exc)
        return (
            f"the connection to the temenos daemon at {where} broke during {method} {path} "
            f"({_reason(exc)}): the daemon may have stopped, and how the command ended is "
            "unknown; check its log and restart it"
        )


class _TooLarge(httpx.TransportError):
    """An answer over MAX_ANSWER_BYTES."""


async def _read_bounded(response: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise _TooLarge(
                f"the daemon's answer is over {MAX_ANSWER_BYTES // (1024 * 1024)} MiB, more "
                "than any command's output it should send: it is not read"
            )
    return bytes(body)


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
