"""The daemon's request handler: one dispatch over the route families (sandboxd.server.routes),
its error mapping, and the audit line every request leaves.

Every answer that is not a 2xx says what was wrong and what to do, as
`{"error": {"code": ..., "message": ...}}`; temenos's routes answer in temenos's shapes,
errors as `{"error": "..."}`. Every request leaves one line in the audit log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import anyio

from sandboxd.api import API_PREFIX, TemenosError
from sandboxd.backend import Backend
from sandboxd.policy.places import home_of
from sandboxd.policy.policy import Policy
from sandboxd.server.audit import AuditLog, AuditNote, AuditRecord, timestamp
from sandboxd.server.config import DaemonConfig
from sandboxd.server.http import CLIENT_GONE, Request, Response, error_response
from sandboxd.server.routes import forks, health, jobs, runs, temenos
from sandboxd.server.routes.common import SESSIONS_PREFIX, DaemonState, Handler, Problem
from sandboxd.sessions.job_store import JobStore

_Methods = dict[str, Handler]
_ROUTES: dict[str, _Methods] = {
    f"{API_PREFIX}/run": {"POST": runs.run},
    f"{API_PREFIX}/health": {"GET": health.health},
    f"{API_PREFIX}/sessions": {"GET": runs.list_sessions},
    f"{API_PREFIX}/gc": {"POST": health.gc},
    "/run": {"POST": temenos.run},
    "/health": {"GET": temenos.health},
    "/jobs": {"GET": temenos.jobs},
}
"""The routes whose path has no id in it."""
_SESSION_ACTIONS: dict[str, _Methods] = {
    "start": {"POST": runs.start_session},
    "fork": {"POST": forks.fork_session},
}
"""POST /v1/sessions/{id}/<action>; any other path below a session is its jobs'."""
_SESSION: _Methods = {"DELETE": runs.close_session}
_SESSION_JOBS: _Methods = {"GET": jobs.session_jobs}
_JOB: _Methods = {"GET": jobs.job, "DELETE": jobs.kill_job}
_TEMENOS_JOB: _Methods = {"GET": temenos.job, "DELETE": temenos.kill_job}


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
        job_store: JobStore | None = None,
    ) -> None:
        """`job_store`: where jobs are kept for the next daemon (None: in memory only)."""
        self._daemon = DaemonState(
            backend=backend,
            policy=policy,
            config=config,
            caller_home=caller_home,
            version=sandboxd_version(),
            job_store=job_store,
        )
        self._audit = audit

    async def restore_jobs(self) -> None:
        """Take over the jobs the daemon before kept, with what the backend took over."""
        await self._daemon.jobs.restore(self._daemon.backend.adopted_jobs())

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
        methods = _methods(request.path)
        route = methods.get(request.method)
        if route is None:
            if methods:
                allowed = sorted(methods)
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
                f"{API_PREFIX}/sessions/{{id}}/start, DELETE "
                f"{API_PREFIX}/sessions/{{id}}, GET {API_PREFIX}/sessions/{{id}}/jobs, GET or "
                f"DELETE {API_PREFIX}/jobs/{{id}}, POST {API_PREFIX}/gc (and temenos's POST "
                "/run, GET /health, GET /jobs, GET or DELETE /jobs/{id})",
            )
        try:
            return await route(self._daemon, request, note)
        except Problem as problem:
            note.error = problem.message
            if not request.path.startswith(f"{API_PREFIX}/"):
                # temenos's shape; its 400 covers every bad request.
                status = 400 if problem.status == 422 else problem.status
                return Response.json(status, TemenosError(error=problem.message))
            return error_response(problem.status, problem.code, problem.message)

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


def _methods(path: str) -> _Methods:
    """The handlers of `path` by method (empty: no such route)."""
    methods = _ROUTES.get(path)
    if methods is not None:
        return methods
    if path.startswith(SESSIONS_PREFIX):
        _, slash, action = path.removeprefix(SESSIONS_PREFIX).partition("/")
        if not slash:  # a session id has no slash
            return _SESSION
        return _SESSION_ACTIONS.get(action, _SESSION_JOBS)
    if path.startswith(jobs.JOBS_PREFIX):
        return _JOB
    if path.startswith(temenos.JOBS_PREFIX):
        return _TEMENOS_JOB
    return {}
