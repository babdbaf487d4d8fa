"""A logos runner that runs each command in sandboxd's sandbox, through the daemon's socket.

It is sandboxd's own client, as a daemon ships one: to logos it is a `logos.Runner`
(structurally: sandboxd imports only logos's vocabulary). Whatever goes wrong on the way (no
daemon, a refused path, the engine down) comes back as `Result.error`, which the loop shows
to the model: a sandbox problem never ends a run.

It keeps jobs (a `logos.runners.job_runner.JobRunner`): a command still running at its background
threshold goes on in the session's container, and the daemon's jobs routes report it; its output
goes on into files in the container, which the session's later commands can read.

`prepare()` starts the session's container while the model writes (the loop calls it beside
its first model request): a command sent with the same options waits for that start instead
of asking for a second one, and a start that failed is that command's result.

It rides through a restart of the daemon (logos.runners.restarts): once it has reached the
daemon, a request whose connection is refused (the daemon is coming back) is sent again for a
while, and one that may be repeated (a start, a job's state) also when its connection broke;
a command whose request may have reached the daemon that went away is reported as unknown,
never run again. The daemon keeps sessions, their files and their jobs across its restarts;
when a session's sandbox was lost all the same (removed behind its back, the engine
restarted), the command is not run and says why, and the session's next command runs in a
fresh sandbox.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from logos.closing import AsyncCloseable
from logos.options import ExecOptions
from logos.result import JobEnd, JobInfo, JobStarted, Result
from logos.runners.live import LiveOutput, current_live_output
from logos.runners.restarts import never_reached, through_restart
from sandboxd import api as wire
from sandboxd.client.connection import (
    async_daemon_client,
    error_detail,
    not_running_message,
    permission_denied,
    permission_denied_message,
)
from sandboxd.paths import resolve_socket_path

_HTTP_MARGIN_S = 90.0
"""On top of the command's timeout: the container's first start (the daemon gives it up
to 60 s), the kill grace and the daemon's own reply margin."""
_CONNECT_TIMEOUT_S = 5.0
_REFUSED = "sandboxd refused {what} ({status} {code})"
_FULL = tuple(
    _REFUSED.format(what=what, status=429, code=wire.TOO_MANY_SESSIONS) + ":"
    for what in ("the command", "to start the sandbox", "the fork")
)
_LOST = tuple(
    _REFUSED.format(what="the fork", status=status, code=code) + ":"
    for status, code in ((404, "unknown_session"), (410, wire.SESSION_LOST))
)
_UNPREPARED = "the sandbox could not be prepared, so this command did not run: "
_FRESH_NEXT = (
    " (This command did not run. This session's next command runs in a fresh, empty sandbox.)"
)
_CLOSE_WAIT_S = 5.0
"""At `aclose()`, how long a daemon that went away is waited for to close the session."""


class SandboxForkError(Exception):
    """The daemon did not fork the session; the message says why and what to do."""


@dataclass(eq=False)
class _Preparation:
    """One start of the session's container, asked for by prepare()."""

    body: str
    """The start request's JSON: a command whose options give the same one waits for it."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str | None = None
    """Why the container did not start (set before `done`)."""


class SandboxRunner(AsyncCloseable):
    """Runs commands through a sandboxd daemon (see `sandboxd serve`).

    `socket`: the daemon's socket (default: `sandboxd.paths.default_socket_path`:
    $SANDBOXD_SOCKET, /run/user/UID/sandboxd.sock, ~/.sandboxd/daemon.sock). `session`: the
    daemon keeps one warm container per session (default: a random id per runner). `image`: one
    of the daemon's allowed images (default: its configured image). `network`: ask for network
    access (the daemon's config must allow it). `unix_sockets`: let commands create Unix
    sockets, e.g. for a test database (the daemon's config must allow it; they could then reach
    host sockets under the allowed paths). `close_session`: remove the session's containers on
    `aclose()`.

    `options.path_ceiling` is sent with every run, start and fork: the daemon holds each
    mount to it where it mounts it (a refusal is the command's error, 403
    path_outside_ceiling). Only `options.env` is sent: the sandbox never inherits the
    caller's environment. Jobs
    end with the session (on `aclose()` when it closes it); the daemon caps how many a caller
    keeps (its answer to one more is the command's error).
    """

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        session: str | None = None,
        image: str | None = None,
        network: bool = False,
        *,
        unix_sockets: bool = False,
        close_session: bool = True,
    ) -> None:
        self.socket_path: Path = resolve_socket_path(socket)
        if session is None:
            session = f"logos-{secrets.token_hex(6)}"
        if not wire.is_valid_session_id(session):
            raise ValueError(
                f"session {session!r} is not a session id: use 1 to 64 of A-Z a-z 0-9 _ . -"
            )
        self.session = session
        self.image = image
        self.network = network
        self.unix_sockets = unix_sockets
        self._close_session = close_session
        self._used = False
        self._reached = False
        """A daemon answered on the socket once: a refused connection now is a restart."""
        self._if_lost: wire.IfLost = "refuse"
        """"fresh" once the daemon said the session's sandbox was lost (and the caller was
        told): the next request asks for a fresh one."""
        self._preparation: _Preparation | None = None
        self._client = async_daemon_client(
            self.socket_path, httpx.Timeout(_HTTP_MARGIN_S, connect=_CONNECT_TIMEOUT_S)
        )
        self._jobs: dict[str, _Job] = {}
        """This runner's jobs whose end was not handed out yet."""

    async def prepare(self, options: ExecOptions) -> None:
        """Start the session's container for commands run with `options`, and return once it
        runs or could not start; never raises for a failure (the first command with these
        options reports it). Run it beside other work: the loop does, beside its first model
        request. A command sent meanwhile waits for this start; `aclose()` cancels it."""
        try:
            body = self._start_request(options).model_dump_json()
        except (ValidationError, PydanticSerializationError):
            return  # the command's own request says what is wrong with these options
        current = self._preparation
        if current is not None and current.body == body and not current.done.is_set():
            await current.done.wait()
            return
        preparation = self._preparation = _Preparation(body)
        try:
            with preparation.scope:
                preparation.error = await self._start(body)
        finally:
            preparation.done.set()

    async def fork(
        self,
        count: int,
        *,
        options: ExecOptions | None = None,
        share_writable_mounts: bool = False,
    ) -> list[SandboxRunner]:
        """`count` runners of new sessions, each starting from a copy of what this session's
        commands changed outside their paths (its /tmp and $HOME). Their commands need the
        same options as this one's, or (given `options`) those: each fork's sandbox then
        mounts their paths instead. Each closes its session on `aclose()`.

        Raises SandboxForkError (nothing to fork yet, a command still running, a read-write
        path two sandboxes would share without `share_writable_mounts`, more than the
        daemon's max_forks, ...)."""
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        sessions = [f"logos-{secrets.token_hex(6)}" for _ in range(count)]
        try:
            content = wire.ForkRequest(
                into=tuple(sessions),
                sandbox=None if options is None else self._start_request(options),
                share_writable_mounts=share_writable_mounts,
            ).model_dump_json()
        except (ValidationError, PydanticSerializationError) as exc:
            raise SandboxForkError(
                f"sandboxd cannot fork with these options: {_invalid(exc)}"
            ) from None
        try:
            response = await through_restart(
                lambda: self._post_to_session("fork", content), again=self._never_reached
            )
        except httpx.TransportError as exc:
            raise SandboxForkError(self._transport_problem(exc, 0.0)) from None
        if response.status_code != 200:
            raise SandboxForkError(_refusal(response, "the fork"))
        forks = []
        for session in sessions:
            fork = SandboxRunner(
                self.socket_path, session, self.image, self.network, unix_sockets=self.unix_sockets
            )
            fork._used = True  # its sandbox runs: aclose() removes it
            forks.append(fork)
        return forks

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.monotonic()
        live = current_live_output()
        try:
            place = self._start_request(options)
            body = wire.RunRequest(
                **dict(place),
                command=command,
                timeout_s=options.timeout_s,
                max_output_bytes=options.max_output_bytes,
                max_saved_output_bytes=options.max_saved_output_bytes,
                session=self.session,
                background_after_s=options.background_at_s(),
                live=live is not None,
            )
            # WHY serialised here: text with a lone surrogate (e.g. from a model's JSON
            # escapes) passes some validators but cannot be encoded as UTF-8.
            content = body.model_dump_json()
            prepared = place.model_dump_json()
        except (ValidationError, PydanticSerializationError) as exc:
            return _failed(command, started, f"sandboxd cannot run this request: {_invalid(exc)}")
        unprepared = await self._wait_for_preparation(prepared)
        if unprepared is not None:
            return _failed(command, started, unprepared)
        try:
            response = await through_restart(
                lambda: self._post_run(content, options.timeout_s, live),
                again=self._never_reached,
            )
        except httpx.TransportError as exc:
            # The request may have reached the daemon and started the session's container.
            self._used = self._used or not isinstance(exc, httpx.ConnectError)
            return _failed(command, started, self._transport_problem(exc, options.timeout_s))
        except BaseException:
            self._used = True  # cancelled mid-request: the container may exist
            raise
        if response is None:
            self._used = True
            return _failed(command, started, self._not_a_result())
        if response.status_code != 200:
            return _failed(command, started, self._refused(response))
        self._used = True
        self._if_lost = "refuse"
        try:
            result = wire.RunResponse.from_json(response.content).to_result()
        except ValidationError:
            return _failed(command, started, self._not_a_result())
        if result.job is not None:
            self._jobs[result.job.id] = _Job(command, started, result.job)
        return result

    async def _post_run(
        self, content: str, timeout_s: float, live: LiveOutput | None
    ) -> httpx.Response | None:
        """The daemon's answer to a run; a live answer's pieces go to `live` as they come,
        and its last line becomes the answer. None: a live answer that broke off or holds
        something else than its lines."""
        async with self._client.stream(
            "POST",
            f"{wire.API_PREFIX}/run",
            content=content,
            headers={"content-type": "application/json"},
            timeout=httpx.Timeout(timeout_s + _HTTP_MARGIN_S, connect=_CONNECT_TIMEOUT_S),
        ) as response:
            self._reached = True
            if response.headers.get("content-type", "").partition(";")[0] != wire.NDJSON:
                await response.aread()
                return response
            async for text in response.aiter_lines():
                try:
                    line = wire.LiveLine.model_validate_json(text)
                except ValidationError:
                    return None
                if line.output is not None and live is not None:
                    piece = line.output
                    live.write(piece.stream, piece.text.encode(), piece.skipped_bytes)
                elif line.status is not None and line.answer is not None:
                    return httpx.Response(line.status, json=line.answer)
        return None

    def _not_a_result(self) -> str:
        return (
            f"sandboxd on {self.socket_path} answered something that is not a run result: "
            "is the client as recent as the daemon?"
        )

    async def list_jobs(self) -> list[JobInfo]:
        listed = await self._session_jobs()
        running = {job.id for job in listed if job.status == "running"} if listed else set()
        now = time.monotonic()
        return [
            JobInfo(
                job_id,
                job.command,
                now - job.started,
                job.started_as.stdout_file,
                job.started_as.stderr_file,
            )
            for job_id, job in self._jobs.items()
            if job_id in running
        ]

    async def wait_job(self, job_id: str, timeout_s: float) -> JobEnd | None:
        self._known(job_id)
        wait_s = min(timeout_s, wire.MAX_JOB_WAIT_S)
        answer = await self._job_call("GET", job_id, wait_s, params={"wait_s": f"{wait_s:g}"})
        if isinstance(answer, wire.JobResponse) and answer.status == "running":
            return None
        return await self._take(job_id)

    async def kill_job(self, job_id: str) -> JobEnd:
        self._known(job_id)
        return await self._take(job_id)

    async def ended_jobs(self) -> list[JobEnd]:
        listed = await self._session_jobs()
        still_running = {job.id for job in listed or () if job.status == "running"}
        # Ended, forgotten by the daemon (its session closed), or the daemon cannot say.
        return [
            await self._take(job_id) for job_id in list(self._jobs) if job_id not in still_running
        ]

    def _known(self, job_id: str) -> None:
        if job_id not in self._jobs:
            raise LookupError(f"there is no job {job_id} (or its end was reported already)")

    async def _session_jobs(self) -> list[wire.JobModel] | None:
        """The session's jobs as the daemon lists them; None when it cannot say."""
        if not self._jobs:
            return []
        answer = await self._call("GET", f"{wire.API_PREFIX}/sessions/{self.session}/jobs", 0.0)
        if isinstance(answer, str):
            return None
        try:
            return wire.JobsResponse.model_validate_json(answer.content).jobs
        except ValidationError:
            return None

    async def _take(self, job_id: str) -> JobEnd:
        """The job's end, stopping it if it still runs; the daemon forgets it."""
        job = self._jobs.pop(job_id)
        answer = await self._job_call("DELETE", job_id, 0.0)
        if isinstance(answer, str):
            failed = Result(
                command=job.command, error=answer, duration_s=time.monotonic() - job.started
            )
            return JobEnd(job_id, failed)
        return JobEnd(job_id, answer.result)

    async def _job_call(
        self, method: str, job_id: str, wait_s: float, params: dict[str, str] | None = None
    ) -> wire.JobResponse | str:
        """A jobs route's answer, or what went wrong in words."""
        answer = await self._call(method, f"{wire.API_PREFIX}/jobs/{job_id}", wait_s, params)
        if isinstance(answer, str):
            return answer
        try:
            return wire.JobResponse.model_validate_json(answer.content)
        except ValidationError:
            return (
                f"sandboxd on {self.socket_path} answered something that is not a job: is the "
                "client as recent as the daemon?"
            )

    async def _call(
        self, method: str, url: str, wait_s: float, params: dict[str, str] | None = None
    ) -> httpx.Response | str:
        """A 200 answer, or what went wrong in words. Asked again through a restart of the
        daemon: a job's state and its end may be asked twice."""
        try:
            response = await through_restart(
                lambda: self._client.request(
                    method,
                    url,
                    params=params,
                    timeout=httpx.Timeout(wait_s + _HTTP_MARGIN_S, connect=_CONNECT_TIMEOUT_S),
                ),
                again=self._repeatable,
            )
        except httpx.TransportError as exc:
            return self._transport_problem(exc, wait_s)
        self._reached = True
        if response.status_code != 200:
            return _refusal(response)
        return response

    async def aclose(self) -> None:
        """Cancel a preparation still under way, close the session on the daemon (unless told
        not to) and the connections."""
        preparation = self._preparation
        if preparation is not None:
            preparation.scope.cancel()
            with anyio.CancelScope(shield=True):
                await preparation.done.wait()
        try:
            if self._close_session and self._used:
                # A daemon that does not come back soon: the session's sandbox ends itself,
                # idle, or with its orphan time.
                with contextlib.suppress(httpx.TransportError):
                    await through_restart(
                        lambda: self._client.delete(
                            f"{wire.API_PREFIX}/sessions/{self.session}", timeout=_HTTP_MARGIN_S
                        ),
                        again=self._repeatable,
                        wait_s=_CLOSE_WAIT_S,
                    )
        finally:
            await self._client.aclose()

    def _start_request(self, options: ExecOptions) -> wire.StartRequest:
        """Where commands run with `options` go: the fields a run and a start share."""
        ceiling = options.path_ceiling
        return wire.StartRequest(
            env=dict(options.env),
            allowed_paths=tuple(
                wire.AllowedPathSpec(path=_absolute(p.path), read_only=p.read_only)
                for p in options.allowed_paths
            ),
            workdir=None if options.workdir is None else _absolute(options.workdir),
            network=self.network,
            allowed_hosts=options.allowed_hosts,
            unix_sockets=self.unix_sockets,
            image=self.image,
            if_lost=self._if_lost,
            path_ceiling=None
            if ceiling is None
            else tuple(
                wire.CeilingRootSpec(
                    path=r.path, read_only=r.read_only, device=r.device, inode=r.inode
                )
                for r in ceiling
            ),
        )

    async def _post_to_session(self, action: str, body: str) -> httpx.Response:
        """POST `body` (JSON) to this runner's session's `action` (start, fork)."""
        response = await self._client.post(
            f"{wire.API_PREFIX}/sessions/{self.session}/{action}",
            content=body,
            headers={"content-type": "application/json"},
        )
        self._reached = True
        return response

    async def _start(self, body: str) -> str | None:
        """Ask the daemon to start the session's container; None, or why it did not start."""
        try:
            response = await through_restart(
                lambda: self._post_to_session("start", body), again=self._repeatable
            )
        except httpx.TransportError as exc:
            self._used = self._used or not isinstance(exc, httpx.ConnectError)
            return self._transport_problem(exc, 0.0)
        except BaseException:
            self._used = True  # cancelled mid-request: the container may exist
            raise
        self._used = True
        if response.status_code != 200:
            return self._refused(response, "to start the sandbox")
        self._if_lost = "refuse"
        return None

    def _never_reached(self, exc: httpx.TransportError) -> bool:
        """Whether a request that may not run twice may be sent again: no daemon took it,
        and one was there before (it is restarting)."""
        return self._reached and never_reached(exc) and not permission_denied(exc)

    def _repeatable(self, exc: httpx.TransportError) -> bool:
        """Whether a request that may run twice may be sent again: its connection was refused
        or broke (not timed out), and a daemon was there before."""
        timed_out = isinstance(exc, httpx.TimeoutException)
        return self._reached and not timed_out and not permission_denied(exc)

    def _refused(self, response: httpx.Response, what: str = "the command") -> str:
        """`_refusal`; for a lost session, the next request asks for a fresh sandbox."""
        refusal = _refusal(response, what)
        detail = error_detail(response)
        if detail is not None and detail.code == wire.SESSION_LOST:
            self._if_lost = "fresh"
            return refusal + _FRESH_NEXT
        return refusal

    async def _wait_for_preparation(self, prepared: str) -> str | None:
        """Wait for a preparation of the same sandbox under way; why it failed, once (the
        first command after it says why it did not run, the next ones try again)."""
        preparation = self._preparation
        if preparation is None or preparation.body != prepared:
            return None
        await preparation.done.wait()
        if self._preparation is not preparation or preparation.error is None:
            return None
        self._preparation = None
        return _UNPREPARED + preparation.error

    def _transport_problem(self, exc: httpx.TransportError, timeout_s: float) -> str:
        where = self.socket_path
        if isinstance(exc, httpx.TimeoutException):
            if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                return f"sandboxd on {where} did not accept the connection: is it overloaded?"
            return (
                f"sandboxd on {where} did not answer within {timeout_s + _HTTP_MARGIN_S:g} s "
                "(the command's timeout plus a margin): check the daemon's log"
            )
        if isinstance(exc, httpx.ConnectError):
            if permission_denied(exc):
                return permission_denied_message(where)
            return not_running_message(where)
        return (
            f"the connection to sandboxd on {where} broke while the command ran ({exc}): the "
            "daemon stopped or restarted, so whether the command ran (in part or whole) is "
            "unknown, and it was not run again: check what it would have changed before "
            "running it again (if the daemon does not come back, start it with `sandboxd "
            "serve`)"
        )


@dataclass(frozen=True)
class _Job:
    command: str
    started: float
    """Monotonic time its command was sent."""
    started_as: JobStarted


def _failed(command: str, started: float, error: str) -> Result:
    return Result(command=command, error=error, duration_s=time.monotonic() - started)


def _invalid(exc: ValidationError | PydanticSerializationError) -> str:
    """What is wrong with a request, in one line, with what to do."""
    if isinstance(exc, PydanticSerializationError):
        return (
            "the command, env or a path holds text that is not valid Unicode (a lone "
            "surrogate): pass valid UTF-8 text"
        )
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'request'}: {error['msg']}"
        for error in exc.errors()
    )


def _refusal(response: httpx.Response, what: str = "the command") -> str:
    detail = error_detail(response)
    if detail is None:
        text = response.text.strip()[:500] or "no details"
        return f"sandboxd answered HTTP {response.status_code}: {text}"
    refused = _REFUSED.format(what=what, status=response.status_code, code=detail.code)
    return f"{refused}: {detail.message}"


def refused_when_full(result: Result) -> bool:
    """Whether `result` is the daemon's 429 for a new session over its caps: the command
    (or fork) never ran, and the same one can be sent again once a session ends."""
    return result.error is not None and result.error.removeprefix(_UNPREPARED).startswith(_FULL)


def lost_session(result: Result) -> bool:
    """Whether `result` is the daemon's 404 for forking a session it does not know (never
    started, or removed after idling), or its 410 for one whose sandbox was lost."""
    return result.error is not None and result.error.startswith(_LOST)


def _absolute(path: str) -> str:
    """A relative path means what it means to the caller (as with `LocalRunner`): the
    daemon, which has another working directory, only takes absolute ones."""
    return os.path.abspath(path)
