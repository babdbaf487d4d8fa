"""Runs and sessions: POST /v1/run, POST /v1/sessions/{id}/start, GET /v1/sessions, DELETE
/v1/sessions/{id}.

Sessions are per caller: the backend sees `u<uid>-<session>` (common.backend_session), and
a caller lists and closes only its own.
"""

from __future__ import annotations

from sandboxd.api import (
    API_PREFIX,
    CloseSessionResponse,
    RunRequest,
    RunResponse,
    SessionModel,
    SessionsResponse,
    StartRequest,
    StartResponse,
)
from sandboxd.backend import BackendError
from sandboxd.server.audit import AuditNote
from sandboxd.server.http import Request, Response
from sandboxd.server.routes.common import (
    DaemonState,
    Problem,
    backend_problem,
    backend_session,
    identity,
    parse,
    path_session,
)
from sandboxd.server.routes.execution import (
    Order,
    Placement,
    answer,
    execute,
    execute_watched,
    place,
)


async def run(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    body = parse(RunRequest, request.body)
    order = Order(
        command=body.command,
        placement=Placement.of(body, body.session),
        timeout_s=body.timeout_s,
        max_output_bytes=body.max_output_bytes,
        max_saved_output_bytes=body.max_saved_output_bytes,
        background_after_s=body.background_after_s,
    )
    if body.live and request.early is not None:
        ran = await execute_watched(daemon, order, request.peer, note, request.early)
    else:
        ran = await execute(daemon, order, request.peer, note)
    with answer(ran) as release:
        response = RunResponse.from_result(
            ran.outcome.result,
            sandbox=ran.outcome.sandbox,
            stripped_env_keys=ran.stripped_env_keys,
            notice=ran.notice,
        )
        return Response.json(200, response, release=release)


async def start_session(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    session = path_session(request, note)
    body = parse(StartRequest, request.body)
    # WHY not waiting for another request's start: the caller only wants the sandbox
    # ready; its first command waits for that start in the daemon.
    placed = await place(daemon, Placement.of(body, session), request.peer, note, wait=False)
    outcome = placed.outcome
    if outcome.state == "failed":
        raise Problem(
            502,
            "start_failed",
            f"the sandbox of session {session!r} did not start: {outcome.error}",
        )
    started = StartResponse(
        session=session,
        state=outcome.state,
        sandbox=outcome.sandbox,
        steps=dict(outcome.steps),
        notice=outcome.notice,
    )
    return Response.json(200, started)


async def list_sessions(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    prefix = backend_session(identity(request.peer)[0], "")
    try:
        infos = await daemon.backend.list_sessions()
    except BackendError as exc:
        raise backend_problem(exc) from None
    sessions = [
        SessionModel.model_validate({**vars(info), "id": info.id.removeprefix(prefix)})
        for info in infos
        if info.id.startswith(prefix)
    ]
    return Response.json(200, SessionsResponse(sessions=sessions))


async def close_session(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    session = path_session(request, note)
    try:
        closed = await daemon.backend.close_session(
            backend_session(identity(request.peer)[0], session)
        )
    except BackendError as exc:
        raise backend_problem(exc) from None
    if not closed:
        raise Problem(
            404,
            "unknown_session",
            f"there is no session {session!r}: list yours with GET {API_PREFIX}/sessions",
        )
    return Response.json(200, CloseSessionResponse(session=session, closed=True))
