"""The daemon's routes: HTTP requests in, policy checks, backend calls, JSON answers out.

Every answer that is not a 2xx says what was wrong and what to do, as
`{"error": {"code": ..., "message": ...}}`. Every request leaves one line in the audit log.

Sessions are per caller: the backend sees `u<uid>-<session>`, so two users of one daemon
never share (or close) each other's containers even when they pick the same session id.

Jobs (sandboxd.sessions.jobs): a command still running at its background threshold goes on; its
answer says so, and the jobs routes report it, to its caller only (another caller's job is
answered 404, like an unknown one). temenos's routes answer in temenos's shapes, errors as
`{"error": "..."}`.

Admission: a request lists at most max_allowed_paths paths, which are resolved and checked
on worker threads of their own (a slow or hung filesystem must not stall the event loop,
nor take every worker); and it reserves its reply's worst-case output memory before its
command runs (sandboxd.server.admission), given back once the answer is sent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs

import anyio
from pydantic import BaseModel, ValidationError

from logos.options import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SAVED_OUTPUT_BYTES
from logos.result import JobStarted, Result
from logos.runners.live import FLUSH_S as LIVE_FLUSH_S
from logos.runners.live import LiveOutput
from sandboxd.api import (
    API_PREFIX,
    MAX_JOB_WAIT_S,
    TEMENOS_DEFAULT_TIMEOUT_S,
    CloseSessionResponse,
    ForkRequest,
    ForkResponse,
    GcResponse,
    HealthResponse,
    JobModel,
    JobResponse,
    JobsResponse,
    JobStatus,
    LiveLine,
    LivePieceModel,
    RunRequest,
    RunResponse,
    SessionModel,
    SessionsResponse,
    StartRequest,
    StartResponse,
    TemenosError,
    TemenosHealthResponse,
    TemenosJob,
    TemenosRunRequest,
    TemenosRunResponse,
    WarmPathModel,
    WarmPlacesModel,
    is_valid_session_id,
    job_number_of_temenos_id,
    temenos_job_id,
)
from sandboxd.backend import (
    Backend,
    BackendError,
    BackendJob,
    EngineUnavailableError,
    ExecOutcome,
    ExecRequest,
    ForkRefusedError,
    HealthReport,
    ImageMissingError,
    Mount,
    MountChangedError,
    SandboxSpec,
    StartOutcome,
    TooManySessionsError,
    WarmPlaces,
)
from sandboxd.policy.policy import PathGrant, Policy, PolicyError, home_of
from sandboxd.server.admission import (
    OutputMemoryBudget,
    OutputMemoryRefused,
    Reservation,
    reply_memory_bound,
)
from sandboxd.server.audit import AuditLog, AuditMount, AuditNote, AuditRecord, timestamp
from sandboxd.server.config import DaemonConfig
from sandboxd.server.http import (
    CLIENT_GONE,
    EarlyAnswer,
    PeerCredentials,
    Request,
    Response,
    error_response,
)
from sandboxd.sessions.jobs import Job, JobTable, TooManyJobsError

_Model = TypeVar("_Model", bound=BaseModel)
_SESSIONS_PREFIX = f"{API_PREFIX}/sessions/"
_START_ACTION = "start"
_FORK_ACTION = "fork"
_JOBS_PREFIX = f"{API_PREFIX}/jobs/"
_TEMENOS_JOBS_PREFIX = "/jobs/"
_TEMENOS_STATUSES: dict[str, JobStatus | None] = {
    "": None,
    "all": None,
    "running": "running",
    "completed": "completed",
    "killed": "killed",
}
"""temenos's `status` filter of GET /jobs: "" and "all" take every job."""
PATH_CHECK_THREADS = 4
"""Worker threads for path resolution: few, so that a hung filesystem holds only these and
pure-Python path work leaves the event loop its share of the interpreter."""


class _Problem(Exception):
    """A request answered with an error (4xx/5xx) instead of running."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class _Placement:
    """Where a session's commands run: what chooses (and starts) its sandbox, whichever
    request (a run in our shape or temenos's, a start) asked for it."""

    env: dict[str, str]
    allowed_paths: Sequence[tuple[str, bool]]
    workdir: str | None
    network: bool
    unix_sockets: bool
    session: str
    image: str | None
    allowed_hosts: Sequence[str] = ()
    reclaimable: bool = False
    """A temenos caller's: its idle sandbox may be removed to make room (SandboxSpec)."""


@dataclass(frozen=True)
class _Order:
    """One command to run, and where."""

    command: str
    placement: _Placement
    timeout_s: float | None
    max_output_bytes: int
    max_saved_output_bytes: int
    background_after_s: float | None
    caller_id: str | None = None
    """temenos's opaque caller id, kept with a job for its filter."""


@dataclass(frozen=True)
class _Specified:
    """A placement checked against the policy: its sandbox's spec, env and workdir."""

    spec: SandboxSpec
    env: dict[str, str]
    """Filtered by the policy."""
    stripped_env_keys: list[str]
    workdir: str | None


@dataclass(frozen=True)
class _Placed(_Specified):
    """A placement checked and its sandbox started (or why it did not start)."""

    session: str
    """The backend's session (the caller's uid and session id)."""
    outcome: StartOutcome


@dataclass(frozen=True)
class _Ran:
    outcome: ExecOutcome
    """With `outcome.result.job` set when the command went on as `job`."""
    stripped_env_keys: list[str]
    timeout_s: float
    output_memory: Reservation | None
    """Held until the answer has been sent (see _answer); None when the command never ran."""
    job: Job | None = None


_Route = Callable[[Request, AuditNote], Awaitable[Response]]


def sandboxd_version() -> str:
    try:
        return version("logos")
    except PackageNotFoundError:
        return "unknown"


class App:
    """The request handler the HTTP server calls."""

    def __init__(
        self,
        *,
        backend: Backend,
        policy: Policy,
        config: DaemonConfig,
        audit: AuditLog | None,
        caller_home: Callable[[int], Path | None] = home_of,
    ) -> None:
        self._backend = backend
        self._policy = policy
        self._config = config
        self._audit = audit
        self._caller_home = caller_home
        self._version = sandboxd_version()
        self._path_checks = anyio.CapacityLimiter(PATH_CHECK_THREADS)
        self._output_memory = OutputMemoryBudget(
            config.max_output_memory, wait_s=config.max_output_memory_wait_s
        )
        self._jobs = JobTable(
            max_per_caller=config.max_jobs_per_caller, retention_s=config.finished_job_ttl_s
        )
        self._routes: dict[str, dict[str, _Route]] = {
            f"{API_PREFIX}/run": {"POST": self._run},
            f"{API_PREFIX}/health": {"GET": self._health},
            f"{API_PREFIX}/sessions": {"GET": self._sessions},
            f"{API_PREFIX}/gc": {"POST": self._gc},
            "/run": {"POST": self._temenos_run},
            "/health": {"GET": self._temenos_health},
            "/jobs": {"GET": self._temenos_jobs},
        }

    async def __call__(self, request: Request) -> Response:
        arrived = time.time()
        started = time.monotonic()
        note = AuditNote()
        try:
            response = await self._dispatch(request, note)
        except anyio.get_cancelled_exc_class():
            note.error = (
                "the client disconnected or the daemon shut down before the answer; "
                "the command was killed"
            )
            self._write_audit(request, note, CLIENT_GONE, arrived, started)
            raise
        self._write_audit(request, note, response.status, arrived, started)
        return response

    def refused(self, request: Request, status: int, why: str) -> None:
        """Audit a request the HTTP layer answered itself (e.g. 413, malformed HTTP)."""
        now = time.time()
        self._write_audit(request, AuditNote(error=why), status, now, time.monotonic())

    async def _dispatch(self, request: Request, note: AuditNote) -> Response:
        route, allowed = self._find_route(request)
        if route is None:
            if allowed:
                note.error = f"method {request.method} not allowed"
                response = error_response(
                    405,
                    "method_not_allowed",
                    f"{request.method} is not allowed on {request.path}: use "
                    + " or ".join(allowed),
                )
                return Response(response.status, response.body, (("allow", ", ".join(allowed)),))
            note.error = "unknown route"
            return error_response(
                404,
                "not_found",
                f"no route {request.path}: the API is POST {API_PREFIX}/run, GET "
                f"{API_PREFIX}/health, GET {API_PREFIX}/sessions, POST "
                f"{API_PREFIX}/sessions/{{id}}/{_START_ACTION}, DELETE "
                f"{API_PREFIX}/sessions/{{id}}, GET {API_PREFIX}/sessions/{{id}}/jobs, GET or "
                f"DELETE {API_PREFIX}/jobs/{{id}}, POST {API_PREFIX}/gc (and temenos's POST "
                "/run, GET /health, GET /jobs, GET or DELETE /jobs/{id})",
            )
        try:
            return await route(request, note)
        except _Problem as problem:
            note.error = problem.message
            if not request.path.startswith(f"{API_PREFIX}/"):
                # temenos's shape; its 400 covers every bad request.
                status = 400 if problem.status == 422 else problem.status
                return Response.json(status, TemenosError(error=problem.message))
            return error_response(problem.status, problem.code, problem.message)

    def _find_route(self, request: Request) -> tuple[_Route | None, list[str]]:
        path = request.path
        methods = self._routes.get(path)
        if methods is None and path.startswith(_SESSIONS_PREFIX):
            _, slash, action = path.removeprefix(_SESSIONS_PREFIX).partition("/")
            if not slash:  # a session id has no slash
                methods = {"DELETE": self._close_session}
            elif action == _START_ACTION:
                methods = {"POST": self._start_session}
            elif action == _FORK_ACTION:
                methods = {"POST": self._fork_session}
            else:
                methods = {"GET": self._session_jobs}
        elif methods is None and path.startswith(_JOBS_PREFIX):
            methods = {"GET": self._job, "DELETE": self._kill_job}
        elif methods is None and path.startswith(_TEMENOS_JOBS_PREFIX):
            methods = {"GET": self._temenos_job, "DELETE": self._temenos_kill_job}
        if methods is None:
            return None, []
        return methods.get(request.method), sorted(methods)

    async def _run(self, request: Request, note: AuditNote) -> Response:
        body = _parse(RunRequest, request.body)
        order = _Order(
            command=body.command,
            placement=_placement(body, body.session),
            timeout_s=body.timeout_s,
            max_output_bytes=body.max_output_bytes,
            max_saved_output_bytes=body.max_saved_output_bytes,
            background_after_s=body.background_after_s,
        )
        if body.live and request.early is not None:
            ran = await self._execute_watched(order, request.peer, note, request.early)
        else:
            ran = await self._execute(order, request.peer, note)
        with _answer(ran) as release:
            answer = RunResponse.from_result(
                ran.outcome.result,
                sandbox=ran.outcome.sandbox,
                stripped_env_keys=ran.stripped_env_keys,
            )
            return Response.json(200, answer, release=release)

    async def _temenos_run(self, request: Request, note: AuditNote) -> Response:
        body = _parse(TemenosRunRequest, request.body)
        paths = body.allowed_paths or ()
        for entry in paths:
            if not entry.path.startswith("/"):
                raise _Problem(400, "invalid_path", f"path must be absolute: {entry.path!r}")
        order = _Order(
            command=body.command,
            placement=_Placement(
                env=dict(body.env or {}),
                # temenos's Linux sandbox mounts nothing for a metadata_only path.
                allowed_paths=[(p.path, p.read_only) for p in paths if not p.metadata_only],
                workdir=None,
                network=bool(body.network),
                unix_sockets=False,
                session=body.session_id(),
                image=None,
                reclaimable=True,
            ),
            timeout_s=body.timeout if body.timeout > 0 else TEMENOS_DEFAULT_TIMEOUT_S,
            max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
            max_saved_output_bytes=DEFAULT_MAX_SAVED_OUTPUT_BYTES,
            background_after_s=self._config.temenos_background_after_s,
            caller_id=body.caller_id,
        )
        ran = await self._execute(order, request.peer, note)
        with _answer(ran) as release:
            if ran.job is not None:
                # temenos's answer: no output until the job ends (GET /jobs/{id}).
                background = TemenosRunResponse(
                    stdout="",
                    stderr="",
                    exit_code=0,
                    job_id=temenos_job_id(int(ran.job.id)),
                    status="background",
                )
                return Response.json(200, background, exclude_none=True, release=release)
            result = ran.outcome.result
            answer = TemenosRunResponse(
                stdout=result.stdout,
                stderr=_temenos_stderr(result, killed=False),
                exit_code=result.exit_code if result.exit_code is not None else -1,
                stripped_env_keys=ran.stripped_env_keys or None,
            )
            return Response.json(200, answer, exclude_none=True, release=release)

    async def _start_session(self, request: Request, note: AuditNote) -> Response:
        session = request.path.removeprefix(_SESSIONS_PREFIX).partition("/")[0]
        note.session = session
        _check_session_id(session)
        body = _parse(StartRequest, request.body)
        # WHY not waiting for another request's start: the caller only wants the sandbox
        # ready; its first command waits for that start in the daemon.
        placed = await self._place(_placement(body, session), request.peer, note, wait=False)
        outcome = placed.outcome
        if outcome.state == "failed":
            raise _Problem(
                502,
                "start_failed",
                f"the sandbox of session {session!r} did not start: {outcome.error}",
            )
        answer = StartResponse(
            session=session,
            state=outcome.state,
            sandbox=outcome.sandbox,
            steps=dict(outcome.steps),
        )
        return Response.json(200, answer)

    async def _fork_session(self, request: Request, note: AuditNote) -> Response:
        session = request.path.removeprefix(_SESSIONS_PREFIX).partition("/")[0]
        note.session = session
        _check_session_id(session)
        body = _parse(ForkRequest, request.body)
        most = self._config.max_forks
        if len(body.into) > most:
            raise _Problem(
                422,
                "too_many_forks",
                f"the request asks for {len(body.into)} forks and this daemon makes at most "
                f"{most} at once (max_forks in its config): fork in several requests",
            )
        if len(set(body.into)) != len(body.into):
            raise _Problem(422, "invalid_request", "into lists a session id twice: list each once")
        uid = _identity(request.peer)[0]
        async with contextlib.AsyncExitStack() as pinned:
            spec = None
            if body.sandbox is not None:
                # The forks' paths stay pinned until their sandboxes started (as for a start).
                placement = _placement(body.sandbox, session)
                spec = (
                    await pinned.enter_async_context(self._specified(placement, request.peer, note))
                ).spec
            try:
                outcomes = await self._backend.fork(
                    _backend_session(uid, session),
                    [_backend_session(uid, target) for target in body.into],
                    spec=spec,
                    share_writable_mounts=body.share_writable_mounts,
                )
            except ForkRefusedError as refused:
                raise _Problem(
                    refused.status, refused.code, f"cannot fork session {session!r}: {refused}"
                ) from None
            except BackendError as exc:
                raise _backend_problem(exc) from None
        forks = [
            StartResponse(session=target, state="started", sandbox=o.sandbox, steps=dict(o.steps))
            for target, o in zip(body.into, outcomes, strict=True)
        ]
        return Response.json(200, ForkResponse(session=session, forks=forks))

    async def _execute_watched(
        self, order: _Order, peer: PeerCredentials | None, note: AuditNote, early: EarlyAnswer
    ) -> _Ran:
        """`_execute`, relaying what the command prints as it runs (`RunRequest.live`)."""
        live = LiveOutput()

        async def relay() -> None:
            while True:
                await anyio.sleep(LIVE_FLUSH_S)
                for piece in live.take():
                    output = LivePieceModel.model_validate(piece, from_attributes=True)
                    line = LiveLine(output=output)
                    await early.send_line(line.model_dump_json(exclude_none=True).encode())

        ran: _Ran | _Problem
        async with anyio.create_task_group() as relaying:
            relaying.start_soon(relay)
            try:
                ran = await self._execute(order, peer, note, live)
            except _Problem as problem:
                ran = problem  # WHY out of the group: a task group would wrap it in a group
            finally:
                live.close()
                relaying.cancel_scope.cancel()
        if isinstance(ran, _Problem):
            raise ran
        return ran

    async def _execute(
        self,
        order: _Order,
        peer: PeerCredentials | None,
        note: AuditNote,
        live: LiveOutput | None = None,
    ) -> _Ran:
        note.command = order.command
        started = time.monotonic()
        placed = await self._place(order.placement, peer, note, wait=True)
        timeout_s = min(
            order.timeout_s or self._config.default_timeout_s, self._config.max_timeout_s
        )
        stripped = placed.stripped_env_keys
        if placed.outcome.error is not None:
            failed = Result(
                command=order.command,
                error=placed.outcome.error,
                duration_s=time.monotonic() - started,
            )
            note.error = placed.outcome.error
            return _Ran(ExecOutcome(failed, sandbox=""), stripped, timeout_s, None)
        exec_request = ExecRequest(
            # temenos runs an empty command (`bash -c ''` exits 0); a backend wants one.
            command=order.command or ":",
            env=placed.env,
            workdir=placed.workdir,
            timeout_s=timeout_s,
            max_output_bytes=order.max_output_bytes,
            max_saved_output_bytes=order.max_saved_output_bytes,
            background_after_s=order.background_after_s,
            live=live,
        )
        output_memory = await self._reserve_output_memory(order.max_output_bytes)
        try:
            outcome = await self._backend.run(placed.session, placed.spec, exec_request)
        except BackendError as exc:
            output_memory.release()
            raise _backend_problem(exc) from None
        except BaseException:
            output_memory.release()
            raise
        result = outcome.result
        note.sandbox = outcome.sandbox
        job = None
        if outcome.job is not None:
            try:
                job = await self._keep_job(outcome.job, order, placed.spec.uid, timeout_s, result)
            except BaseException:
                output_memory.release()
                raise
            note.job = job.id
            went_on = JobStarted(job.id, result.stdout_file, result.stderr_file)
            outcome = replace(outcome, result=replace(result, job=went_on))
        note.exit_code = result.exit_code
        note.signal = result.signal
        note.timed_out = result.timed_out
        note.error = result.error
        return _Ran(
            outcome=outcome,
            stripped_env_keys=stripped,
            timeout_s=timeout_s,
            output_memory=output_memory,
            job=job,
        )

    async def _keep_job(
        self, backend_job: BackendJob, order: _Order, uid: int, timeout_s: float, result: Result
    ) -> Job:
        """The command went on as a job: keep it for its caller (429 over the cap)."""
        try:
            # WHY shielded: a job its caller was not told of must still be listed.
            with anyio.CancelScope(shield=True):
                job = await self._jobs.add(
                    backend_job,
                    uid=uid,
                    session=order.placement.session,
                    command=order.command,
                    caller_id=order.caller_id,
                    started_at=time.time() - result.duration_s,
                    timeout_s=timeout_s,
                    max_output_bytes=order.max_output_bytes,
                    stdout_file=result.stdout_file,
                    stderr_file=result.stderr_file,
                )
        except TooManyJobsError as refused:
            raise _Problem(429, "too_many_jobs", str(refused)) from None
        return job

    async def _place(
        self, placement: _Placement, peer: PeerCredentials | None, note: AuditNote, *, wait: bool
    ) -> _Placed:
        """Check `placement` against the policy and start its sandbox unless it runs (see
        Backend.start for `wait`). Raises _Problem for a refusal (403, 409, 429, 503…)."""
        async with self._specified(placement, peer, note) as specified:
            session = _backend_session(specified.spec.uid, placement.session)
            try:
                # WHY the paths stay pinned only until here: while the sandbox starts and its
                # mounts are checked, and not for the whole (maybe hour-long) command.
                outcome = await self._backend.start(session, specified.spec, wait=wait)
            except BackendError as exc:
                raise _backend_problem(exc) from None
        if outcome.steps:
            note.start_steps = dict(outcome.steps)
        return _Placed(**vars(specified), session=session, outcome=outcome)

    @contextlib.asynccontextmanager
    async def _specified(
        self, placement: _Placement, peer: PeerCredentials | None, note: AuditNote
    ) -> AsyncIterator[_Specified]:
        """The sandbox `placement` asks for, checked against the policy, its paths pinned
        while the context lasts (start it there). Raises _Problem for a refusal."""
        note.session = placement.session
        note.network = placement.network
        note.allowed_hosts = list(placement.allowed_hosts) or None
        uid, gid = _identity(peer)
        self._check_path_count(placement)
        self._check_host_count(placement)
        try:
            image = self._policy.check_image(placement.image)
            note.image = image
            hosts = self._policy.check_hosts(placement.allowed_hosts, network=placement.network)
            self._policy.check_network(placement.network)
            self._policy.check_unix_sockets(placement.unix_sockets)
            grant, workdir = await self._checked_paths(placement, uid, note)
        except PolicyError as refusal:
            raise _Problem(refusal.status, refusal.code, refusal.message) from None
        with grant:
            try:
                env, stripped = self._policy.filter_env(placement.env)
            except PolicyError as refusal:
                raise _Problem(refusal.status, refusal.code, refusal.message) from None
            note.stripped_env_keys = stripped
            spec = SandboxSpec(
                image=image,
                mounts=tuple(
                    Mount(path=g.path, read_only=g.read_only, identity=g.identity)
                    for g in grant.paths
                ),
                network=placement.network,
                uid=uid,
                gid=gid,
                limits=self._config.limits,
                unix_sockets=placement.unix_sockets,
                allowed_hosts=hosts,
                reclaimable=placement.reclaimable,
            )
            yield _Specified(spec, env, stripped, workdir)

    def _check_path_count(self, placement: _Placement) -> None:
        count, most = len(placement.allowed_paths), self._config.max_allowed_paths
        if count > most:
            raise _Problem(
                422,
                "too_many_paths",
                f"the request lists {count} allowed_paths and this daemon takes at most {most} "
                "(max_allowed_paths in its config): mount a common parent directory instead",
            )

    def _check_host_count(self, placement: _Placement) -> None:
        count, most = len(placement.allowed_hosts), self._config.max_allowed_hosts
        if count > most:
            raise _Problem(
                422,
                "too_many_hosts",
                f"the request lists {count} allowed_hosts and this daemon takes at most {most} "
                "(max_allowed_hosts in its config): use a wildcard such as *.example.org",
            )

    async def _checked_paths(
        self, placement: _Placement, uid: int, note: AuditNote
    ) -> tuple[PathGrant, str | None]:
        """The pinned mounts and the resolved workdir, checked on a path-check thread."""
        granted: list[PathGrant] = []

        def check() -> str | None:
            grant = self._grant_paths(placement, uid)
            granted.append(grant)
            note.mounts = [
                AuditMount(
                    path=g.path,
                    read_only=g.read_only,
                    device=g.identity.device,
                    inode=g.identity.inode,
                    kind=g.identity.kind,
                )
                for g in grant.paths
            ]
            return self._policy.check_workdir(placement.workdir, grant.paths)

        try:
            if not placement.allowed_paths and placement.workdir is None:
                workdir = check()  # nothing to resolve: spare the warm path a thread hop
            else:
                # WHY not abandoned on cancel: the thread's grant holds descriptors, closed
                # below once the call has returned.
                workdir = await anyio.to_thread.run_sync(check, limiter=self._path_checks)
        except BaseException:
            for grant in granted:
                grant.close()
            raise
        return granted[0], workdir

    def _grant_paths(self, placement: _Placement, uid: int) -> PathGrant:
        """Policy.grant_paths for `placement` (blocking: resolves, pins and stats every path)."""
        return self._policy.grant_paths(placement.allowed_paths, caller_home=self._caller_home(uid))

    async def _reserve_output_memory(self, max_output_bytes: int) -> Reservation:
        try:
            return await self._output_memory.reserve(reply_memory_bound(max_output_bytes))
        except OutputMemoryRefused as refused:
            if refused.budget_exceeded:
                fix = "lower max_output_bytes, or raise max_output_memory in the daemon's config"
                code = "output_memory_exhausted"
            else:
                fix = "retry later, or lower max_output_bytes"
                code = "output_memory_busy"
            raise _Problem(
                503, code, f"{refused.message} (max_output_bytes = {max_output_bytes}): {fix}"
            ) from None

    async def _health(self, request: Request, note: AuditNote) -> Response:
        report = await self._health_report()
        if not report.ok:
            note.error = "; ".join(report.problems)
        answer = HealthResponse(
            ok=report.ok,
            version=self._version,
            engine_version=report.engine_version,
            image=report.image,
            image_present=report.image_present,
            problems=list(report.problems),
            containers=report.containers,
            max_sessions=report.max_sessions,
            max_sessions_per_caller=report.max_sessions_per_caller,
            warm=report.warm,
            pool_problem=report.pool_problem,
            pool_size=report.pool_size,
            pool_memory=report.pool_memory,
            pool_places=[
                _warm_places_model(places, _identity(request.peer)[0])
                for places in report.pool_places
            ],
        )
        return Response.json(200 if report.ok else 503, answer)

    async def _temenos_health(self, request: Request, note: AuditNote) -> Response:
        report = await self._health_report()
        if not report.ok:
            note.error = "; ".join(report.problems)
        answer = TemenosHealthResponse(ok=report.ok, platform=sys.platform, version=self._version)
        return Response.json(200 if report.ok else 503, answer)

    async def _health_report(self) -> HealthReport:
        try:
            return await self._backend.health()
        except BackendError as exc:
            raise _backend_problem(exc) from None

    async def _sessions(self, request: Request, note: AuditNote) -> Response:
        prefix = _backend_session(_identity(request.peer)[0], "")
        try:
            infos = await self._backend.list_sessions()
        except BackendError as exc:
            raise _backend_problem(exc) from None
        sessions = [
            SessionModel(
                id=info.id.removeprefix(prefix),
                containers=list(info.containers),
                created_at=info.created_at,
                last_used_at=info.last_used_at,
                running=info.running,
            )
            for info in infos
            if info.id.startswith(prefix)
        ]
        return Response.json(200, SessionsResponse(sessions=sessions))

    async def _close_session(self, request: Request, note: AuditNote) -> Response:
        session = request.path.removeprefix(_SESSIONS_PREFIX)
        note.session = session
        _check_session_id(session)
        try:
            closed = await self._backend.close_session(
                _backend_session(_identity(request.peer)[0], session)
            )
        except BackendError as exc:
            raise _backend_problem(exc) from None
        if not closed:
            raise _Problem(
                404,
                "unknown_session",
                f"there is no session {session!r}: list yours with GET {API_PREFIX}/sessions",
            )
        return Response.json(200, CloseSessionResponse(session=session, closed=True))

    async def _session_jobs(self, request: Request, note: AuditNote) -> Response:
        session, _, rest = request.path.removeprefix(_SESSIONS_PREFIX).partition("/")
        note.session = session
        _check_session_id(session)
        if rest != "jobs":
            raise _Problem(
                404,
                "not_found",
                f"no route {request.path[:200]}: a session's jobs are at "
                f"GET {_SESSIONS_PREFIX}{{id}}/jobs",
            )
        await self._jobs.prune()
        uid = _identity(request.peer)[0]
        jobs = [_job_model(job) for job in self._jobs.of_caller(uid) if job.session == session]
        return Response.json(200, JobsResponse(jobs=jobs))

    async def _job(self, request: Request, note: AuditNote) -> Response:
        """The job's status and its output since its run's answer; `?wait_s=S` first waits
        up to S seconds for its end."""
        job = await self._find_job(request, _JOBS_PREFIX, note)
        wait_s = _query_seconds(request, "wait_s", MAX_JOB_WAIT_S)
        if wait_s:
            with anyio.move_on_after(wait_s):
                await job.backend.wait()
        return await self._job_answer(job)

    async def _kill_job(self, request: Request, note: AuditNote) -> Response:
        """Stop the job if it runs, answer its end (as GET does), and forget it."""
        job = await self._find_job(request, _JOBS_PREFIX, note)
        if job.status == "running":
            await job.kill()
        response = await self._job_answer(job)
        await self._jobs.forget(job)
        return response

    async def _job_answer(self, job: Job) -> Response:
        reservation = await self._reserve_output_memory(job.max_output_bytes)
        try:
            result = await job.backend.output(since_background=True)
            job.mark_read()
            answer = JobResponse(**dict(_job_model(job)), result=result)
            return Response.json(200, answer, release=reservation.release)
        except BaseException:
            reservation.release()
            raise

    async def _temenos_jobs(self, request: Request, note: AuditNote) -> Response:
        """temenos's GET /jobs: the caller's jobs, without output, filtered by `status` and
        `caller_id`."""
        query = parse_qs(request.query)
        status_text = query.get("status", [""])[-1]
        if status_text not in _TEMENOS_STATUSES:
            # Go's %q quoting, as temenos words it.
            quoted = json.dumps(status_text[:64], ensure_ascii=False)
            raise _Problem(400, "invalid_status", f"invalid job status {quoted}")
        status = _TEMENOS_STATUSES[status_text]
        caller_id = query.get("caller_id", [""])[-1]
        await self._jobs.prune()
        jobs = [
            _temenos_job(job)
            for job in self._jobs.of_caller(_identity(request.peer)[0])
            if (status is None or job.status == status)
            and (not caller_id or job.caller_id == caller_id)
        ]
        body = b"[" + b",".join(job.model_dump_json(exclude_none=True).encode() for job in jobs)
        return Response(200, body + b"]", (("content-type", "application/json"),))

    async def _temenos_job(self, request: Request, note: AuditNote) -> Response:
        job = await self._find_job(request, _TEMENOS_JOBS_PREFIX, note, temenos=True)
        return await self._temenos_job_answer(job)

    async def _temenos_kill_job(self, request: Request, note: AuditNote) -> Response:
        job = await self._find_job(request, _TEMENOS_JOBS_PREFIX, note, temenos=True)
        if job.status != "running":
            raise _Problem(409, "job_ended", "job already completed")
        await job.kill()
        return await self._temenos_job_answer(job)

    async def _temenos_job_answer(self, job: Job) -> Response:
        """temenos's job: no output while it runs; once ended, its whole output (head and
        tail)."""
        if job.backend.end is None:
            return Response.json(200, _temenos_job(job), exclude_none=True)
        reservation = await self._reserve_output_memory(job.max_output_bytes)
        try:
            result = await job.backend.output(since_background=False)
            job.mark_read()
            stderr = _temenos_stderr(result, killed=job.kill_requested)
            answer = _temenos_job(job, stdout=result.stdout, stderr=stderr)
            return Response.json(200, answer, exclude_none=True, release=reservation.release)
        except BaseException:
            reservation.release()
            raise

    async def _find_job(
        self, request: Request, prefix: str, note: AuditNote, *, temenos: bool = False
    ) -> Job:
        """The caller's job the path names: by its decimal id, or its temenos id (hex)."""
        named = job_id = request.path.removeprefix(prefix)
        note.job = job_id[:64]
        await self._jobs.prune()
        if temenos:
            number = job_number_of_temenos_id(job_id)
            job_id = "" if number is None else str(number)
        job = self._jobs.get(job_id, _identity(request.peer)[0])
        if job is None:
            raise _Problem(
                404,
                "unknown_job",
                f"job not found: there is no job {named[:64]!r} of yours (ended jobs are "
                f"forgotten {self._config.finished_job_ttl_s:g} s after their end was read); "
                f"list yours with GET {API_PREFIX}/sessions/{{id}}/jobs or GET /jobs",
            )
        note.session = job.session
        note.command = job.command
        return job

    async def _gc(self, request: Request, note: AuditNote) -> Response:
        try:
            removed = await self._backend.gc()
        except BackendError as exc:
            raise _backend_problem(exc) from None
        return Response.json(200, GcResponse(removed=removed))

    def _write_audit(
        self, request: Request, note: AuditNote, status: int, arrived: float, started: float
    ) -> None:
        if self._audit is None:
            return
        peer = request.peer
        self._audit.write(
            AuditRecord(
                time=timestamp(arrived),
                peer_uid=peer.uid if peer else None,
                peer_gid=peer.gid if peer else None,
                peer_pid=peer.pid if peer else None,
                method=request.method,
                path=request.path,
                status=status,
                duration_s=round(time.monotonic() - started, 6),
                **dict(note),
            )
        )


@contextlib.contextmanager
def _answer(ran: _Ran) -> Iterator[Callable[[], None] | None]:
    """The release of the reply's output memory, for the answer being built: the HTTP layer
    calls it once the answer is sent; if building the answer fails, it is called at once."""
    release = ran.output_memory.release if ran.output_memory is not None else None
    try:
        yield release
    except BaseException:
        if release is not None:
            release()
        raise


def _check_session_id(session: str) -> None:
    if not is_valid_session_id(session):
        raise _Problem(
            400,
            "invalid_session",
            f"{session!r} is not a session id: use 1 to 64 of A-Z a-z 0-9 _ . -",
        )


def _query_seconds(request: Request, name: str, most: float) -> float:
    """A number of seconds from the query string (0 when absent)."""
    values = parse_qs(request.query).get(name)
    if not values:
        return 0.0
    try:
        seconds = float(values[-1])
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= most:
        raise _Problem(
            400,
            "invalid_query",
            f"{name}={values[-1][:32]!r} is not a number of seconds from 0 to {most:g}",
        )
    return seconds


def _job_model(job: Job) -> JobModel:
    return JobModel(
        id=job.id,
        session=job.session,
        command=job.command[:4096],
        status=job.status,
        started_at=job.started_at,
        ended_at=job.backend.ended_at,
        stdout_file=job.stdout_file,
        stderr_file=job.stderr_file,
    )


def _temenos_job(job: Job, stdout: str = "", stderr: str = "") -> TemenosJob:
    """temenos's JobInfo: its omitempty fields (a 0 exit code among them) left out."""
    end = job.backend.end
    exit_code = None if end is None else (end.exit_code if end.exit_code is not None else -1)
    ended_at = job.backend.ended_at
    return TemenosJob(
        id=temenos_job_id(int(job.id)),
        caller_id=job.caller_id or None,
        command=job.command,
        status=job.status,
        exit_code=exit_code or None,
        stdout=stdout or None,
        stderr=stderr or None,
        started_at=_rfc3339(job.started_at),
        completed_at=None if ended_at is None else _rfc3339(ended_at),
    )


def _rfc3339(unix_time: float) -> str:
    return dt.datetime.fromtimestamp(unix_time, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(model: type[_Model], body: bytes) -> _Model:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        invalid_json = [e for e in exc.errors() if e["type"] == "json_invalid"]
        if invalid_json:
            raise _Problem(
                400,
                "invalid_json",
                f"the request body is not valid JSON ({invalid_json[0]['msg']}): send a JSON "
                "object",
            ) from None
        raise _Problem(422, "invalid_request", _describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "body"
        if error["type"] == "extra_forbidden":
            problems.append(f"unknown field {where!r}")
        elif error["type"] == "missing":
            problems.append(f"missing field {where!r}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"field {where!r}: {message}")
    return "invalid request: " + "; ".join(problems)


def _placement(body: StartRequest, session: str) -> _Placement:
    return _Placement(
        env=body.env,
        allowed_paths=[(p.path, p.read_only) for p in body.allowed_paths],
        workdir=body.workdir,
        network=body.network,
        unix_sockets=body.unix_sockets,
        session=session,
        image=body.image,
        allowed_hosts=body.allowed_hosts,
    )


def _identity(peer: PeerCredentials | None) -> tuple[int, int]:
    """The uid:gid commands run as: the caller's (the daemon's own without SO_PEERCRED)."""
    if peer is None:
        return os.getuid(), os.getgid()
    return peer.uid, peer.gid


def _warm_places_model(places: WarmPlaces, caller: int) -> WarmPlacesModel:
    """WHY paths for the caller's own specs only: another user's paths are theirs."""
    mounts = places.spec.mounts
    paths = [WarmPathModel(path=mount.path, read_only=mount.read_only) for mount in mounts]
    return WarmPlacesModel(
        uid=places.spec.uid,
        paths=paths if places.spec.uid == caller else None,
        warm=places.warm,
        starting=places.starting,
        memory=places.spec.limits.memory,
        last_claimed_at=places.last_claimed_at,
        kept_warm=places.kept_warm,
    )


def _backend_session(uid: int, session: str) -> str:
    return f"u{uid}-{session}"


def _backend_problem(exc: BackendError) -> _Problem:
    if isinstance(exc, MountChangedError):
        status = 409
    elif isinstance(exc, TooManySessionsError):
        status = 429
    elif isinstance(exc, EngineUnavailableError | ImageMissingError):
        status = 503
    else:
        status = 502
    return _Problem(status, exc.code, str(exc))


def _temenos_stderr(result: Result, *, killed: bool) -> str:
    """The command's stderr, after the one line temenos writes first when its command did
    not end by itself: Go's context error (a kill on request, a timeout) or why it failed."""
    if killed:
        first = "context canceled"
    elif result.timed_out:
        first = "context deadline exceeded"
    elif result.error:
        first = result.error
    else:
        return result.stderr
    return f"{first}\n{result.stderr}"
