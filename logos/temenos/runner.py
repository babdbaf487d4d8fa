"""A runner that speaks the temenos daemon's API, so logos can use a temenos sandbox.

temenos (seatbelt on macOS, bubblewrap on Linux, inside pods with service-account tokens)
and sandboxd's temenos-compatible routes answer the same JSON, so this one client serves
both. `POST /run` either answers the command's end, or, for a command still running after
the daemon's background threshold (temenos's is 30 s), a job id. A temenos job is a
background job, so the runner keeps jobs (a `logos.runners.job_runner.JobRunner`): when the caller
asks for jobs (`ExecOptions.background_after_s`), such a command comes back as job 1, 2, …
(numbered by the runner: daemons' ids are not numbers), which `wait_job`, `kill_job` and
`ended_jobs` follow through `GET /jobs/{id}` and `DELETE /jobs/{id}`; otherwise the runner
follows the job itself until it ends. Either way a job is killed at its command's timeout if
the daemon has not done it, when the caller is cancelled, and when the runner closes.

Whatever goes wrong (no daemon, a refusal, a daemon that dies mid-command) comes back as
`Result.error`; a timeout as `timed_out`; an exit status the daemon could not give (its -1)
in words, never as a made-up exit code.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from logos.ceiling import early_refusal
from logos.options import NONINTERACTIVE_ENV, ExecOptions
from logos.result import JobEnd, JobInfo, JobStarted, Result
from logos.runners.auth_token import AuthToken, TokenError
from logos.runners.base import Runner
from logos.runners.capture import CapturedOutput, OutputCapture
from logos.runners.restarts import RESTART_WAIT_S
from logos.temenos import api as wire
from logos.temenos.address import TemenosAddress, resolve_address
from logos.temenos.client import TemenosClient, TemenosFailure

_HTTP_MARGIN_S = 90.0
"""On top of the command's timeout for `POST /run`: a sandbox's first start and the kill grace."""
KILL_GRACE_S = 10.0
"""How long past the command's timeout a job may still run before the runner kills it
itself: the daemon kills it at the timeout, and says so at the next look."""
_POLL_START_S = 0.2
_POLL_MAX_S = 2.0
_NO_EXIT_STATUS = -1
"""temenos's exit code for a command that did not exit by itself (a signal, a kill, or a
start that failed): it does not say which."""


@dataclass
class _Job:
    """A command the daemon moved to the background."""

    daemon_id: str
    command: str
    options: ExecOptions
    started: float
    shown_stdout: str = ""
    """The output so far that its start showed (its end shows what came after)."""
    shown_stderr: str = ""

    @property
    def overdue(self) -> bool:
        """Still running well past its timeout: the daemon did not kill it."""
        deadline = self.started + math.ceil(self.options.timeout_s) + KILL_GRACE_S
        return time.monotonic() >= deadline


class TemenosRunner(Runner):
    """Runs commands through a temenos daemon (or sandboxd's temenos routes).

    `address`: a socket path, `http://host:port` or `host:port` (default: $TEMENOS_LISTEN_ADDR,
    $TEMENOS_SOCKET_PATH, ~/.temenos/daemon.sock). `network`: ask for network access (the
    daemon decides). `caller_id`: the daemon's name for this caller (default: a random id per
    runner; sandboxd keeps one warm sandbox per caller id). `auth_token`: a token, or the file
    that holds one (e.g. a Kubernetes service-account token, read again when it rotates).

    A temenos daemon takes no ceiling (`ExecOptions.path_ceiling`): given one, the runner holds
    each allowed path to it itself, resolved and placed as it is just before the request is
    sent, and refuses the command when one leads outside; it never drops the ceiling. The
    daemon resolves the path again when it mounts it, so a swap between that check and the
    mount still wins: where a caller's paths may be swapped under it (another sandbox
    writing to their parent), use sandboxd, which holds the mount itself to the ceiling.

    Commands run in the first allowed path (temenos has no other working directory). Only
    `options.env` and logos's non-interactive variables are sent; the daemon may withhold
    some, and those of `options.env` it withheld are named in the result's stderr. A job
    is handed out at `background_after_s` or at the daemon's threshold, whichever is later.
    """

    def __init__(
        self,
        address: str | TemenosAddress | None = None,
        *,
        network: bool = False,
        caller_id: str | None = None,
        auth_token: AuthToken | None = None,
        restart_wait_s: float = RESTART_WAIT_S,
    ) -> None:
        self.address = address if isinstance(address, TemenosAddress) else resolve_address(address)
        self.network = network
        self.caller_id = caller_id or f"logos-{secrets.token_hex(6)}"
        self._token = auth_token or AuthToken()
        self._client = TemenosClient(self.address, restart_wait_s=restart_wait_s)
        self._jobs: dict[str, _Job] = {}
        """The jobs handed out, by the runner's number."""
        self._next_job = 1
        self._followed: set[str] = set()
        """The daemon's ids of the jobs `run()` is following."""

    def __repr__(self) -> str:
        return f"TemenosRunner(address={str(self.address)!r}, caller_id={self.caller_id!r})"

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.monotonic()
        try:
            if self._client.closed:
                raise TemenosFailure("this temenos runner is closed: open a new one")
            await _hold_to_ceiling(options)
            answer = await self._client.run(
                self._request(command, options),
                answer_within_s=math.ceil(options.timeout_s) + _HTTP_MARGIN_S,
            )
            if answer.status == wire.BACKGROUND:
                if not answer.job_id:
                    raise TemenosFailure(
                        f"the temenos daemon at {self.address} answered a job without an id"
                    )
                after = options.background_at_s()
                job = _Job(answer.job_id, command, options, started)
                return await self._follow(job, math.inf if after is None else started + after)
        except TemenosFailure as failure:
            return _failed(command, started, self._token.scrub(str(failure)))
        notes = _withheld(answer.stripped_env_keys, options.env)
        return _result(
            command, answer.stdout, answer.stderr, answer.exit_code, options, started, notes
        )

    async def list_jobs(self) -> list[JobInfo]:
        listed = []
        for number, job in list(self._jobs.items()):
            try:
                state = await self._client.job(job.daemon_id)
            except TemenosFailure:
                continue  # `ended_jobs` reports what went wrong
            if state.status == wire.JOB_RUNNING and not job.overdue:
                listed.append(JobInfo(number, job.command, time.monotonic() - job.started))
        return listed

    async def wait_job(self, job_id: str, timeout_s: float) -> JobEnd | None:
        job = self._known(job_id)
        until = time.monotonic() + timeout_s
        pause = _POLL_START_S
        while True:
            end = await self._end_if_over(job_id, job)
            if end is not None or time.monotonic() >= until:
                return end
            await anyio.sleep(min(pause, max(0.0, until - time.monotonic())))
            pause = min(pause * 1.5, _POLL_MAX_S)

    async def kill_job(self, job_id: str) -> JobEnd:
        job = self._known(job_id)
        del self._jobs[job_id]
        state = await self._client.kill(job.daemon_id)
        try:
            state = state or await self._client.job(job.daemon_id)  # it had ended already
        except TemenosFailure as failure:
            return JobEnd(job_id, self._lost(job, failure))
        stopped = f"stopped on request (DELETE /jobs/{job.daemon_id})"
        return JobEnd(job_id, self._end(job, state, stopped=stopped))

    async def ended_jobs(self) -> list[JobEnd]:
        ends = []
        for number, job in list(self._jobs.items()):
            end = await self._end_if_over(number, job)
            if end is not None:
                ends.append(end)
        return ends

    async def aclose(self) -> None:
        """Kill the jobs still running, then close the connections."""
        try:
            with anyio.CancelScope(shield=True):
                daemon_ids = {job.daemon_id for job in self._jobs.values()} | self._followed
                self._jobs.clear()
                for daemon_id in daemon_ids:
                    await self._client.kill(daemon_id)
        finally:
            await self._client.aclose()

    def _request(self, command: str, options: ExecOptions) -> str:
        if options.allowed_hosts:
            raise TemenosFailure(
                "temenos has no allowlist of hosts, so allowed_hosts cannot be honoured: use "
                "sandboxd, or network=true if every host may be reached"
            )
        paths = options.allowed_paths
        workdir = options.workdir
        if workdir is not None and (not paths or _absolute(workdir) != _absolute(paths[0].path)):
            raise TemenosFailure(
                f"temenos runs commands in the first allowed path, so workdir {workdir} cannot "
                "be honoured: list it first in allowed_paths instead"
            )
        try:
            token = self._token.current()
        except TokenError as exc:
            raise TemenosFailure(str(exc)) from None
        try:
            body = wire.TemenosRunRequest(
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
            raise TemenosFailure(
                "the command, env or a path holds text that is not valid Unicode (a lone "
                "surrogate): pass valid UTF-8 text"
            ) from None

    async def _follow(self, job: _Job, until: float) -> Result:
        """Poll the job until it ends, or until `until` (then it is handed out as a job);
        kill it when overdue, on cancellation or on close."""
        self._followed.add(job.daemon_id)
        pause = _POLL_START_S
        try:
            while True:
                state = await self._client.job(job.daemon_id)
                if state.status != wire.JOB_RUNNING:
                    return self._end(job, state)
                if job.overdue:
                    return await self._kill_overdue(job, state)
                if time.monotonic() >= until:
                    return self._went_on(job, state)
                await anyio.sleep(min(pause, max(0.0, until - time.monotonic())))
                pause = min(pause * 1.5, _POLL_MAX_S)
        except TemenosFailure as failure:
            with anyio.CancelScope(shield=True):
                await self._client.kill(job.daemon_id)
            raise TemenosFailure(
                f"lost job {job.daemon_id} after {time.monotonic() - job.started:.1f} s: {failure}"
            ) from None
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._client.kill(job.daemon_id)
            raise
        finally:
            self._followed.discard(job.daemon_id)

    def _went_on(self, job: _Job, state: wire.JobInfo) -> Result:
        """The job's start, with its output so far; its end comes from the jobs methods."""
        number = str(self._next_job)
        self._next_job += 1
        job.shown_stdout, job.shown_stderr = state.stdout, state.stderr
        self._jobs[number] = job
        out = _cut(state.stdout, job.options.max_output_bytes)
        err = _cut(state.stderr, job.options.max_output_bytes)
        return Result(
            command=job.command,
            stdout=out.text,
            stderr=err.text,
            duration_s=time.monotonic() - job.started,
            stdout_dropped_bytes=out.dropped_bytes,
            stderr_dropped_bytes=err.dropped_bytes,
            job=JobStarted(number),
        )

    async def _end_if_over(self, number: str, job: _Job) -> JobEnd | None:
        """The job's end once it ended (or is overdue, then killed), taken from the list;
        None while it runs."""
        try:
            state = await self._client.job(job.daemon_id)
        except TemenosFailure as failure:
            if self._jobs.pop(number, None) is None:
                return None  # taken meanwhile by another caller
            return JobEnd(number, self._lost(job, failure))
        if state.status == wire.JOB_RUNNING and not job.overdue:
            return None
        if self._jobs.pop(number, None) is None:
            return None
        if state.status == wire.JOB_RUNNING:
            return JobEnd(number, await self._kill_overdue(job, state))
        return JobEnd(number, self._end(job, state))

    async def _kill_overdue(self, job: _Job, state: wire.JobInfo) -> Result:
        state = await self._client.kill(job.daemon_id) or state
        note = (
            f"temenos: job {job.daemon_id} still ran {KILL_GRACE_S:g} s past its timeout, so "
            "logos killed it"
        )
        return self._end(job, state, overdue_note=note)

    def _end(
        self,
        job: _Job,
        state: wire.JobInfo,
        *,
        stopped: str | None = None,
        overdue_note: str | None = None,
    ) -> Result:
        """The Result of a job's end: the output after what its start showed, and how it
        ended in words when the daemon killed it."""
        stdout = _after(state.stdout, job.shown_stdout)
        stderr = _after(state.stderr, job.shown_stderr)
        options, started = job.options, job.started
        if overdue_note is not None:
            return _result(
                job.command, stdout, stderr, None, options, started, [overdue_note], timed_out=True
            )
        if state.status != wire.JOB_KILLED:
            return _result(job.command, stdout, stderr, state.exit_code, options, started, ())
        elapsed = time.monotonic() - started
        if stopped is None and elapsed >= options.timeout_s:
            return _result(job.command, stdout, stderr, None, options, started, (), timed_out=True)
        error = stopped or (
            f"the temenos daemon at {self.address} reports job {job.daemon_id} killed after "
            f"{elapsed:.1f} s, before its {options.timeout_s:g} s timeout (a DELETE /jobs "
            "from another client, or the daemon shutting down)"
        )
        return _result(job.command, stdout, stderr, None, options, started, (), error=error)

    def _lost(self, job: _Job, failure: TemenosFailure) -> Result:
        error = self._token.scrub(str(failure))
        return Result(command=job.command, error=error, duration_s=time.monotonic() - job.started)

    def _known(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise LookupError(f"there is no job {job_id} (or its end was reported already)")
        return job


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
    error: str | None = None,
) -> Result:
    """The Result of a command's end; -1 (no exit status) becomes words, never an exit code."""
    if exit_code == _NO_EXIT_STATUS and not timed_out and error is None:
        if time.monotonic() - started >= options.timeout_s:
            timed_out = True
        else:
            error = (
                "the daemon reports no exit status (temenos's -1): the command was killed by "
                "a signal, or could not start; its stderr may say which"
            )
    if timed_out or error is not None:
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


def _after(whole: str, shown: str) -> str:
    """What came after the output already shown (all of it when the daemon's cut moved)."""
    return whole[len(shown) :] if shown and whole.startswith(shown) else whole


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


def _absolute(path: str) -> str:
    """A relative path means what it means to the caller; the daemon takes absolute ones."""
    return os.path.abspath(path)


async def _hold_to_ceiling(options: ExecOptions) -> None:
    """Raise TemenosFailure naming a path `options.path_ceiling` refuses as it is now; on a
    thread, as a path's file system may hang."""
    ceiling = options.path_ceiling
    if ceiling is None:
        return

    def first_refusal() -> str | None:
        return next(
            (
                refused
                for p in options.allowed_paths
                if (
                    refused := early_refusal(
                        _absolute(p.path), read_only=p.read_only, ceiling=ceiling
                    )
                )
                is not None
            ),
            None,
        )

    refused = await anyio.to_thread.run_sync(first_refusal)
    if refused is not None:
        raise TemenosFailure(refused)
