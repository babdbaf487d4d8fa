"""The daemon's routes: HTTP requests in, policy checks, backend calls, JSON answers out.

Every answer that is not a 2xx says what was wrong and what to do, as
`{"error": {"code": ..., "message": ...}}`. Every request leaves one line in the audit log.

Sessions are per caller: the backend sees `u<uid>-<session>`, so two users of one daemon
never share (or close) each other's containers even when they pick the same session id.

Admission: a request lists at most max_allowed_paths paths, which are resolved and checked
on worker threads of their own (a slow or hung filesystem must not stall the event loop,
nor take every worker); and it reserves its reply's worst-case output memory before its
command runs (sandboxd.admission), given back once the answer is sent.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from logos.options import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SAVED_OUTPUT_BYTES
from logos.result import Result
from sandboxd.admission import (
    OutputMemoryBudget,
    OutputMemoryRefused,
    Reservation,
    reply_memory_bound,
)
from sandboxd.api import (
    API_PREFIX,
    CloseSessionResponse,
    GcResponse,
    HealthResponse,
    RunRequest,
    RunResponse,
    SessionModel,
    SessionsResponse,
    StartRequest,
    StartResponse,
    TemenosHealthResponse,
    TemenosRunRequest,
    TemenosRunResponse,
    is_valid_session_id,
)
from sandboxd.audit import AuditLog, AuditMount, AuditNote, AuditRecord, timestamp
from sandboxd.backend import (
    Backend,
    BackendError,
    EngineUnavailableError,
    ExecOutcome,
    ExecRequest,
    HealthReport,
    ImageMissingError,
    Mount,
    MountChangedError,
    SandboxSpec,
    StartOutcome,
    TooManySessionsError,
)
from sandboxd.config import DaemonConfig
from sandboxd.http import CLIENT_GONE, PeerCredentials, Request, Response, error_response
from sandboxd.policy import PathGrant, Policy, PolicyError, home_of

_Model = TypeVar("_Model", bound=BaseModel)
_SESSIONS_PREFIX = f"{API_PREFIX}/sessions/"
_START_ACTION = "start"
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


@dataclass(frozen=True)
class _Order:
    """One command to run, and where."""

    command: str
    placement: _Placement
    timeout_s: float | None
    max_output_bytes: int
    max_saved_output_bytes: int


@dataclass(frozen=True)
class _Placed:
    """A placement checked and its sandbox started (or why it did not start)."""

    session: str
    """The backend's session (the caller's uid and session id)."""
    spec: SandboxSpec
    env: dict[str, str]
    """Filtered by the policy."""
    stripped_env_keys: list[str]
    workdir: str | None
    outcome: StartOutcome


@dataclass(frozen=True)
class _Ran:
    outcome: ExecOutcome
    stripped_env_keys: list[str]
    timeout_s: float
    output_memory: Reservation | None
    """Held until the answer has been sent (see _answer); None when the command never ran."""


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
        self._routes: dict[str, dict[str, _Route]] = {
            f"{API_PREFIX}/run": {"POST": self._run},
            f"{API_PREFIX}/health": {"GET": self._health},
            f"{API_PREFIX}/sessions": {"GET": self._sessions},
            f"{API_PREFIX}/gc": {"POST": self._gc},
            "/run": {"POST": self._temenos_run},
            "/health": {"GET": self._temenos_health},
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
                f"{API_PREFIX}/sessions/{{id}}, POST {API_PREFIX}/gc (and temenos's POST /run, "
                "GET /health)",
            )
        try:
            return await route(request, note)
        except _Problem as problem:
            note.error = problem.message
            return error_response(problem.status, problem.code, problem.message)

    def _find_route(self, request: Request) -> tuple[_Route | None, list[str]]:
        methods = self._routes.get(request.path)
        if methods is None and request.path.startswith(_SESSIONS_PREFIX):
            _, slash, action = request.path.removeprefix(_SESSIONS_PREFIX).partition("/")
            if not slash:
                methods = {"DELETE": self._close_session}
            elif action == _START_ACTION:
                methods = {"POST": self._start_session}
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
        )
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
            if entry.metadata_only:
                raise _Problem(
                    422,
                    "unsupported",
                    f"metadata_only mounts ({entry.path}) are not supported by sandboxd: drop "
                    "the flag and mount the path read-only",
                )
        order = _Order(
            command=body.command,
            placement=_Placement(
                env=dict(body.env or {}),
                allowed_paths=[(p.path, p.read_only) for p in paths],
                workdir=None,
                network=bool(body.network),
                unix_sockets=False,
                session=body.session_id(),
                image=None,
            ),
            timeout_s=body.timeout or None,
            max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
            max_saved_output_bytes=DEFAULT_MAX_SAVED_OUTPUT_BYTES,
        )
        ran = await self._execute(order, request.peer, note)
        with _answer(ran) as release:
            result = ran.outcome.result
            stderr = result.stderr
            for line in _temenos_notes(result, ran.timeout_s):
                stderr += ("" if not stderr or stderr.endswith("\n") else "\n") + line + "\n"
            answer = TemenosRunResponse(
                stdout=result.stdout,
                stderr=stderr,
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

    async def _execute(self, order: _Order, peer: PeerCredentials | None, note: AuditNote) -> _Ran:
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
            command=order.command,
            env=placed.env,
            workdir=placed.workdir,
            timeout_s=timeout_s,
            max_output_bytes=order.max_output_bytes,
            max_saved_output_bytes=order.max_saved_output_bytes,
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
        note.exit_code = result.exit_code
        note.signal = result.signal
        note.timed_out = result.timed_out
        note.error = result.error
        return _Ran(
            outcome=outcome,
            stripped_env_keys=stripped,
            timeout_s=timeout_s,
            output_memory=output_memory,
        )

    async def _place(
        self, placement: _Placement, peer: PeerCredentials | None, note: AuditNote, *, wait: bool
    ) -> _Placed:
        """Check `placement` against the policy and start its sandbox unless it runs (see
        Backend.start for `wait`). Raises _Problem for a refusal (403, 409, 429, 503…)."""
        note.session = placement.session
        note.network = placement.network
        uid, gid = _identity(peer)
        self._check_path_count(placement)
        try:
            image = self._policy.check_image(placement.image)
            note.image = image
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
            )
            session = _backend_session(uid, placement.session)
            try:
                # WHY the paths stay pinned only until here: while the sandbox starts and its
                # mounts are checked, and not for the whole (maybe hour-long) command.
                outcome = await self._backend.start(session, spec, wait=wait)
            except BackendError as exc:
                raise _backend_problem(exc) from None
        if outcome.steps:
            note.start_steps = dict(outcome.steps)
        return _Placed(session, spec, env, stripped, workdir, outcome)

    def _check_path_count(self, placement: _Placement) -> None:
        count, most = len(placement.allowed_paths), self._config.max_allowed_paths
        if count > most:
            raise _Problem(
                422,
                "too_many_paths",
                f"the request lists {count} allowed_paths and this daemon takes at most {most} "
                "(max_allowed_paths in its config): mount a common parent directory instead",
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
    )


def _check_session_id(session: str) -> None:
    if not is_valid_session_id(session):
        raise _Problem(
            400,
            "invalid_session",
            f"{session!r} is not a session id: use 1 to 64 of A-Z a-z 0-9 _ . -",
        )


def _identity(peer: PeerCredentials | None) -> tuple[int, int]:
    """The uid:gid commands run as: the caller's (the daemon's own without SO_PEERCRED)."""
    if peer is None:
        return os.getuid(), os.getgid()
    return peer.uid, peer.gid


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


def _temenos_notes(result: Result, timeout_s: float) -> list[str]:
    """temenos answers only stdout/stderr/exit_code: what else happened goes to stderr."""
    notes = []
    if result.timed_out:
        notes.append(f"sandboxd: the command timed out after {timeout_s:g} s and was killed")
    elif result.oom_killed:
        notes.append("sandboxd: the command ran out of memory and was killed")
    elif result.signal is not None:
        notes.append(f"sandboxd: the command was killed by {result.signal_name}")
    if result.error:
        notes.append(f"sandboxd: {result.error}")
    return notes
