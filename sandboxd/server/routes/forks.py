"""Forks: POST /v1/sessions/{id}/fork, new sessions each holding a copy of what the session's
commands changed outside its mounts (see sandboxd.backend.Backend.fork)."""

from __future__ import annotations

import contextlib

from sandboxd.api import ForkRequest, ForkResponse, StartResponse
from sandboxd.backend import BackendError, ForkRefusedError
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
from sandboxd.server.routes.execution import Placement, specified


async def fork_session(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    session = path_session(request, note)
    body = parse(ForkRequest, request.body)
    most = daemon.config.max_forks
    if len(body.into) > most:
        raise Problem(
            422,
            "too_many_forks",
            f"the request asks for {len(body.into)} forks and this daemon makes at most "
            f"{most} at once (max_forks in its config): fork in several requests",
        )
    if len(set(body.into)) != len(body.into):
        raise Problem(422, "invalid_request", "into lists a session id twice: list each once")
    uid = identity(request.peer)[0]
    async with contextlib.AsyncExitStack() as pinned:
        spec = None
        if body.sandbox is not None:
            # The forks' paths stay pinned until their sandboxes started (as for a start).
            placement = Placement.of(body.sandbox, session)
            checked = specified(daemon, placement, request.peer, note)
            spec = (await pinned.enter_async_context(checked)).spec
        try:
            outcomes = await daemon.backend.fork(
                backend_session(uid, session),
                [backend_session(uid, target) for target in body.into],
                spec=spec,
                share_writable_mounts=body.share_writable_mounts,
            )
        except ForkRefusedError as refused:
            raise Problem(
                refused.status, refused.code, f"cannot fork session {session!r}: {refused}"
            ) from None
        except BackendError as exc:
            raise backend_problem(exc) from None
    forks = [
        StartResponse(session=target, state="started", sandbox=o.sandbox, steps=dict(o.steps))
        for target, o in zip(body.into, outcomes, strict=True)
    ]
    return Response.json(200, ForkResponse(session=session, forks=forks))
