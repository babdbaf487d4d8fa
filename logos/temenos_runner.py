"""A runner that speaks the temenos daemon's API, so logos can use a temenos sandbox.

temenos (seatbelt on macOS, bubblewrap on Linux, inside pods with service-account tokens)
and sandboxd's temenos-compatible routes answer the same JSON, so this one client serves
both. `POST /run` either answers the command's end, or, for a command still running after
the daemon's background threshold (30 s by default), a job id: the runner then follows the
job (`GET /jobs/{id}`) until it ends, kills it (`DELETE /jobs/{id}`) at the command's timeout
if the daemon has not, when the caller is cancelled, or when the runner closes.

Whatever goes wrong (no daemon, a refusal, a daemon that dies mid-command) comes back as
`Result.error`; a timeout as `timed_out`; an exit status the daemon could not give (its -1)
in words, never as a made-up exit code.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import time
from collections.abc import Iterable
from typing import TypeVar

import anyio
import httpx
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from logos import temenos_api as wire
from logos.auth_token import AuthToken, TokenError
from logos.capture import CapturedOutput, OutputCapture
from logos.options import NONINTERACTIVE_ENV, ExecOptions
from logos.result import Result
from logos.temenos_address import TemenosAddress, resolve_address

HTTP_MARGIN_S = 90.0
"""On top of the command's timeout for `POST /run`: a sandbox's first start and the kill grace."""
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
"""For the short requests: a job's state, a kill, the health check."""
KILL_GRACE_S = 10.0
"""How long past the command's timeout a job may still run before the runner kills it
itself: the daemon kills it at the timeout, and says so at its next poll."""
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The most of one answer the runner reads: temenos cuts outputs at 64 KiB, sandboxd at the
request's cap; more than this is a broken or hostile daemon, not a command's output."""
_POLL_START_S = 0.2
_POLL_MAX_S = 2.0
_NO_EXIT_STATUS = -1
"""temenos's exit code for a command that did not exit by itself (a signal, a kill, or a
start that failed): it does not say which."""


class _Failure(Exception):
    """A request that did not get a usable answer; the message says what and what to do."""


class _NotFound(_Failure):
    """A job id the daemon does not know (404)."""


_Answer = TypeVar("_Answer", bound=BaseModel)


class TemenosRunner:
    """Runs commands through a temenos daemon (or sandboxd's temenos routes).

    `address`: a socket path, `http://host:port` or `host:port` (default: $TEMENOS_LISTEN_ADDR,
    $TEMENOS_SOCKET_PATH, ~/.temenos/daemon.sock). `network`: ask for network access (the
    daemon decides). `caller_id`: the daemon's name for this caller (default: a random id per
    runner; sandboxd keeps one warm sandbox per caller id). `auth_token`: a token, or the file
    that holds one (e.g. a Kubernetes service-account token, read again when it rotates).

    Commands run in the first allowed path (temenos has no other working directory). Only
    `options.env` and logos's non-interactive variables are sent; the daemon may withhold
    some, and those of `options.env` it withheld are named in the result's stderr.
    """

    def __init__(
        self,
        address: str | TemenosAddress | None = None,
        *,
        network: bool = False,
        caller_id: str | None = None,
        auth_token: AuthToken | None = None,
    ) -> None:
        self.address = address if isinstance(address, TemenosAddress) else resolve_address(address)
        self.network = network
        self.caller_id = caller_id or f"logos-{secrets.token_hex(6)}"
        self._token = auth_token or AuthToken()
        self._client = self.address.async_client(
            httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        )
        self._jobs: set[str] = set()
        """The jobs being followed: killed when the runner closes."""
        self._closed = False

    def __repr__(self) -> str:
        return f"TemenosRunner(address={str(self.address)!r}, caller_id={self.caller_id!r})"

    async def __aenter__(self) -> TemenosRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.monotonic()
        try:
            if self._closed:
                raise _Failure("this temenos runner is closed: open a new one")
            content = self._request(command, options)
            answer = await self._send(
                "POST",
                "/run",
                wire.RunResponse,
                content=content,
                answer_within_s=math.ceil(options.timeout_s) + HTTP_MARGIN_S,
            )
            if answer.status == wire.BACKGROUND:
                return await self._follow(command, answer.job_id, options, started)
        except _Failure as failure:
            return _failed(command, started, self._token.scrub(str(failure)))
        notes = _withheld(answer.stripped_env_keys, options.env)
        return _result(
            command, answer.stdout, answer.stderr, answer.exit_code, options, started, notes
        )

    async def aclose(self) -> None:
        """Kill the jobs still being followed, then close the connections."""
        self._closed = True
        try:
            with anyio.CancelScope(shield=True):
                for job_id in list(self._jobs):
                    await self._kill(job_id)
        finally:
            await self._client.aclose()

    def _request(self, command: str, options: ExecOptions) -> str:
        paths = options.allowed_paths
        workdir = options.workdir
        if workdir is not None and (not paths or _absolute(workdir) != _absolute(paths[0].path)):
            raise _Failure(
                f"temenos runs commands in the first allowed path, so workdir {workdir} cannot "
                "be honoured: list it first in allowed_paths instead"
            )
        try:
            token = self._token.current()
        except TokenError as exc:
            raise _Failure(str(exc)) from None
        try:
            body = wire.RunRequest(
                command=command,
                env={**NONINTERACTIVE_ENV, **options.env},
                allowed_paths=[
                    wire.AllowedPath(path=_absolute(p.path), read_only=p.read_only) for p in paths
                ],
                network=self.network,
                timeout=math.ceil(options.timeout_s),
                caller_id=self.caller_id,
                auth_token=token,
            )
            # WHY serialised here: text with a lone surrogate cannot be encoded as UTF-8.
            return body.model_dump_json()
        except (ValidationError, PydanticSerializationError):
            raise _Failure(
                "the command, env or a path holds text that is not valid Unicode (a lone "
                "surrogate): pass valid UTF-8 text"
            ) from None

    async def _follow(
        self, command: str, job_id: str, options: ExecOptions, started: float
    ) -> Result:
        """Poll the job until it ends; kill it at its timeout, on cancellation or on close."""
        if not job_id:
            raise _Failure(f"the temenos daemon at {self.address} answered a job without an id")
        self._jobs.add(job_id)
        deadline = started + math.ceil(options.timeout_s) + KILL_GRACE_S
        pause = _POLL_START_S
        try:
            while True:
                job = await self._job(job_id)
                if job.status != wire.JOB_RUNNING:
                    break
                if time.monotonic() >= deadline:
                    job = await self._kill(job_id) or job
                    note = (
                        f"temenos: job {job_id} still ran {KILL_GRACE_S:g} s past its timeout, "
                        "so logos killed it"
                    )
                    return _result(
                        command,
                        job.stdout,
                        job.stderr,
                        None,
                        options,
                        started,
                        [note],
                        timed_out=True,
                    )
                await anyio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 1.5, _POLL_MAX_S)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._kill(job_id)
            raise
        finally:
            self._jobs.discard(job_id)
        if job.status == wire.JOB_KILLED:
            elapsed = time.monotonic() - started
            if elapsed >= options.timeout_s:
                return _result(
                    command, job.stdout, job.stderr, None, options, started, (), timed_out=True
                )
            raise _Failure(
                f"the temenos daemon at {self.address} reports job {job_id} killed after "
                f"{elapsed:.1f} s, before its {options.timeout_s:g} s timeout (a DELETE "
                "/jobs from another client, or the daemon shutting down); its output so far "
                f"was: {_preview(job.stdout, job.stderr)}"
            )
        return _result(command, job.stdout, job.stderr, job.exit_code, options, started, ())

    async def _job(self, job_id: str) -> wire.JobInfo:
        try:
            return await self._send("GET", f"/jobs/{job_id}", wire.JobInfo)
        except _NotFound:
            raise _Failure(
                f"the temenos daemon at {self.address} no longer knows job {job_id} (it "
                "restarted, or dropped the job): how the command ended is unknown"
            ) from None

    async def _kill(self, job_id: str) -> wire.JobInfo | None:
        """DELETE the job, within a bound; its final state, or None when that failed (it had
        ended already, or the daemon is gone: nothing is left to kill either way)."""
        with anyio.move_on_after(REQUEST_TIMEOUT_S):
            with contextlib.suppress(_Failure, RuntimeError):
                return await self._send("DELETE", f"/jobs/{job_id}", wire.JobInfo)
        return None

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
        request = self._client.build_request(
            method,
            path,
            content=content,
            headers=headers,
            timeout=httpx.Timeout(answer_within_s, connect=CONNECT_TIMEOUT_S),
        )
        try:
            response = await self._client.send(request, stream=True)
            try:
                body = await _read_bounded(response)
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise _Failure(self._transport_problem(exc, method, path, answer_within_s)) from None
        except RuntimeError:
            if self._closed:  # aclose() closed the client under a request in flight
                raise _Failure("the runner was closed while the command ran") from None
            raise
        if response.status_code == 404 and path.startswith("/jobs/"):
            raise _NotFound(f"no job {path.removeprefix('/jobs/')}")
        if response.status_code != 200:
            raise _Failure(self._refusal(response.status_code, body))
        try:
            return shape.model_validate_json(body)
        except ValidationError:
            raise _Failure(
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
        self, exc: httpx.TransportError, method: str, path: str, timeout: float
    ) -> str:
        where = self.address
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            start = (
                "start it (`temenos daemon`), or point --sandbox-addr / $TEMENOS_LISTEN_ADDR / "
                "$TEMENOS_SOCKET_PATH at it"
            )
            return f"cannot reach a temenos daemon at {where} ({_reason(exc)}): {start}"
        if isinstance(exc, httpx.TimeoutException):
            return (
                f"the temenos daemon at {where} did not answer {method} {path} within "
                f"{timeout:g} s: check the daemon's log"
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


def _result(
    command: str,
    stdout: str,
    stderr: str,
    exit_code: int | None,
    options: ExecOptions,
    started: float,
    notes: Iterable[str],
    *,
    timed_out: bool = False,
) -> Result:
    """The Result of a command's end; -1 (no exit status) becomes words, never an exit code."""
    error = None
    if exit_code == _NO_EXIT_STATUS and not timed_out:
        exit_code = None
        if time.monotonic() - started >= options.timeout_s:
            timed_out = True
        else:
            error = (
                "the daemon reports no exit status (temenos's -1): the command was killed by "
                "a signal, or could not start; its stderr may say which"
            )
    elif timed_out:
        exit_code = None
    out = _cut(stdout, options.max_output_bytes)
    err = _cut(_with_notes(stderr, notes), options.max_output_bytes)
    return Result(
        command=command,
        stdout=out.text,
        stderr=err.text,
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        stdout_dropped_bytes=out.dropped_bytes,
        stderr_dropped_bytes=err.dropped_bytes,
        error=error,
    )


def _cut(text: str, limit: int) -> CapturedOutput:
    capture = OutputCapture(limit)
    capture.write(text.encode("utf-8", "surrogateescape"))
    return capture.finish()


def _withheld(stripped: list[str] | None, asked: Iterable[str]) -> list[str]:
    """A note naming the keys of the command's own env the daemon withheld (logos's
    non-interactive variables are a courtesy the daemon may refuse without a word)."""
    asked_keys = set(asked)
    keys = sorted(key for key in stripped or () if key in asked_keys)
    if not keys:
        return []
    return [
        "temenos: the daemon withheld these env keys (its allow list does not let them "
        f"through): {', '.join(keys)}"
    ]


def _with_notes(stderr: str, notes: Iterable[str]) -> str:
    for note in notes:
        stderr += ("" if not stderr or stderr.endswith("\n") else "\n") + note + "\n"
    return stderr


def _failed(command: str, started: float, error: str) -> Result:
    return Result(command=command, error=error, duration_s=time.monotonic() - started)


def _preview(stdout: str, stderr: str) -> str:
    text = (stdout + stderr).strip()
    return repr(text[-300:]) if text else "(no output)"


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _absolute(path: str) -> str:
    """A relative path means what it means to the caller; the daemon takes absolute ones."""
    return os.path.abspath(path)
