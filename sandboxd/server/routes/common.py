"""What every route handler shares: the daemon's parts, the refusal, a request's body, session
and caller, and the backend's errors as answers.

A handler is `async (DaemonState, Request, AuditNote) -> Response`; it fills in the audit
note as it learns about the request (sandboxd.server.app writes the line) and raises
`Problem` for an answer that is not a 2xx.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from logos.errors import describe_invalid
from sandboxd.api import API_PREFIX, is_valid_session_id
from sandboxd.backend import (
    Backend,
    BackendError,
    EngineUnavailableError,
    ImageMissingError,
    MountChangedError,
    OutsideCeilingError,
    SessionLostError,
    TooManySessionsError,
)
from sandboxd.policy.policy import Policy
from sandboxd.server.admission import (
    OutputMemoryBudget,
    OutputMemoryRefused,
    Reservation,
    reply_memory_bound,
)
from sandboxd.server.audit import AuditNote
from sandboxd.server.config import DaemonConfig
from sandboxd.server.http import PeerCredentials, Request, Response
from sandboxd.sessions.job_store import JobStore
from sandboxd.sessions.jobs import JobTable

_Model = TypeVar("_Model", bound=BaseModel)
SESSIONS_PREFIX = f"{API_PREFIX}/sessions/"
_PATH_CHECK_THREADS = 4
"""Worker threads for path resolution: few, so that a hung filesystem holds only these and
pure-Python path work leaves the event loop its share of the interpreter."""


class Problem(Exception):
    """A request answered with an error (4xx/5xx) instead of running."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class DaemonState:
    """The daemon's parts every handler may use, made once when it starts serving."""

    backend: Backend
    policy: Policy
    config: DaemonConfig
    caller_home: Callable[[int], Path | None]
    """The home directory of a uid (its credentials are refused as the daemon's are)."""
    version: str
    job_store: JobStore | None = None
    """Where jobs are kept for the next daemon (None: in memory only)."""
    jobs: JobTable = field(init=False)
    output_memory: OutputMemoryBudget = field(init=False)
    path_checks: anyio.CapacityLimiter = field(init=False)
    """Admission (sandboxd.server.admission): a request lists at most max_allowed_paths
    paths, resolved and checked on these threads (a slow or hung filesystem must not stall
    the event loop, nor take every worker)."""

    def __post_init__(self) -> None:
        config = self.config
        self.jobs = JobTable(
            max_per_caller=config.max_jobs_per_caller,
            retention_s=config.finished_job_ttl_s,
            store=self.job_store,
        )
        self.output_memory = OutputMemoryBudget(
            config.max_output_memory, wait_s=config.max_output_memory_wait_s
        )
        self.path_checks = anyio.CapacityLimiter(_PATH_CHECK_THREADS)

    async def reserve_output_memory(self, max_output_bytes: int) -> Reservation:
        """The reply's worst-case output memory, held until its answer is sent; a 503
        Problem when it does not free up in time."""
        try:
            return await self.output_memory.reserve(reply_memory_bound(max_output_bytes))
        except OutputMemoryRefused as refused:
            if refused.budget_exceeded:
                fix = "lower max_output_bytes, or raise max_output_memory in the daemon's config"
                code = "output_memory_exhausted"
            else:
                fix = "retry later, or lower max_output_bytes"
                code = "output_memory_busy"
            raise Problem(
                503, code, f"{refused.message} (max_output_bytes = {max_output_bytes}): {fix}"
            ) from None


Handler = Callable[[DaemonState, Request, AuditNote], Awaitable[Response]]


def parse(model: type[_Model], body: bytes) -> _Model:
    """The request's body as `model`; a 400 or 422 Problem that says what is wrong."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        invalid_json = [e for e in exc.errors() if e["type"] == "json_invalid"]
        if invalid_json:
            raise Problem(
                400,
                "invalid_json",
                f"the request body is not valid JSON ({invalid_json[0]['msg']}): send a JSON "
                "object",
            ) from None
        raise Problem(422, "invalid_request", f"invalid request: {describe_invalid(exc)}") from None


def path_session(request: Request, note: AuditNote) -> str:
    """The session id a `/v1/sessions/{id}...` path names, noted and checked."""
    session = request.path.removeprefix(SESSIONS_PREFIX).partition("/")[0]
    note.session = session
    _check_session_id(session)
    return session


def _check_session_id(session: str) -> None:
    if not is_valid_session_id(session):
        raise Problem(
            400,
            "invalid_session",
            f"{session!r} is not a session id: use 1 to 64 of A-Z a-z 0-9 _ . -",
        )


def identity(peer: PeerCredentials | None) -> tuple[int, int]:
    """The uid:gid commands run as: the caller's (the daemon's own without SO_PEERCRED)."""
    if peer is None:
        return os.getuid(), os.getgid()
    return peer.uid, peer.gid


def backend_session(uid: int, session: str) -> str:
    """The backend's session for a caller's: `u<uid>-<session>`, so two users of one daemon
    never share (or close) each other's sandboxes even when they pick the same session id."""
    return f"u{uid}-{session}"


def backend_problem(exc: BackendError) -> Problem:
    if isinstance(exc, SessionLostError):
        status = 410
    elif isinstance(exc, OutsideCeilingError):
        status = 403
    elif isinstance(exc, MountChangedError):
        status = 409
    elif isinstance(exc, TooManySessionsError):
        status = 429
    elif isinstance(exc, EngineUnavailableError | ImageMissingError):
        status = 503
    else:
        status = 502
    return Problem(status, exc.code, str(exc))


def session_lost(session: str, lost: SessionLostError) -> Problem:
    """The 410 for a caller's session whose sandbox was lost: what happened, and the two
    ways on."""
    return Problem(
        410,
        lost.code,
        f"session {session!r} lost its sandbox: {lost.reason}. What its commands made outside "
        "the allowed paths (/tmp, $HOME), its running commands and its jobs are gone, and "
        'this request did not run: send it again with if_lost = "fresh" to go on in a '
        f"fresh, empty sandbox, or close the session (DELETE {SESSIONS_PREFIX}{session})",
    )
