"""The HTTP API (Starlette): routes, the token check, bounded bodies, and errors that say
what was wrong, never a traceback.

    POST   /v1/runs                    start a run → {run, session, events}
    GET    /v1/runs                    the live runs and those finished lately
    GET    /v1/runs/{id}               status, usage, cost, stop reason
    GET    /v1/runs/{id}/events        server-sent events; Last-Event-ID replays what was missed
    POST   /v1/runs/{id}/cancel        stop the model, kill the commands, keep what was done
    GET    /v1/approvals               commands waiting for approval, across runs
    POST   /v1/approvals/{id}          {"approve": bool, "reason": "…"}
    GET    /v1/sessions                saved conversations
    GET    /v1/sessions/{id}           one, as its trajectory's records
    DELETE /v1/sessions/{id}
    GET    /v1/memory                  the memory notes
    GET|PUT|DELETE /v1/memory/{key}    one note ({"text": "…"} to PUT)
    GET    /                           the page (no data in it: it asks for the token)

Every /v1 request needs `Authorization: Bearer <token>`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from logos.commands.memory_store import NoteError
from logos.errors import RecordFileError
from logos.records.trajectory import step_to_json
from logos.serve.api import ApiError, ApprovalAnswer, NoteRequest, RunRequest, describe_invalid
from logos.serve.approvals import Approvals, UnknownApproval
from logos.serve.auth import bearer_matches
from logos.serve.hub import read_published
from logos.serve.page import PAGE_FILES, page_response
from logos.serve.runs import Runs
from logos.serve.sessions import SessionBusy, Sessions, UnknownSession
from logos.serve.setup import ServerSetup

M = TypeVar("M", bound=BaseModel)


def build_app(setup: ServerSetup, token: str, runs: Runs, approvals: Approvals) -> ASGIApp:
    """The application; `runs` must be bound to the server's task group before requests."""
    api = _Api(setup, runs, approvals)
    routes = [
        Route("/v1/runs", api.start_run, methods=["POST"]),
        Route("/v1/runs", api.list_runs, methods=["GET"]),
        Route("/v1/runs/{run_id}", api.run_status, methods=["GET"]),
        Route("/v1/runs/{run_id}/events", api.run_events, methods=["GET"]),
        Route("/v1/runs/{run_id}/cancel", api.cancel_run, methods=["POST"]),
        Route("/v1/approvals", api.list_approvals, methods=["GET"]),
        Route("/v1/approvals/{approval_id}", api.decide, methods=["POST"]),
        Route("/v1/sessions", api.list_sessions, methods=["GET"]),
        Route("/v1/sessions/{session_id}", api.get_session, methods=["GET"]),
        Route("/v1/sessions/{session_id}", api.delete_session, methods=["DELETE"]),
        Route("/v1/memory", api.list_notes, methods=["GET"]),
        Route("/v1/memory/{key}", api.get_note, methods=["GET"]),
        Route("/v1/memory/{key}", api.put_note, methods=["PUT"]),
        Route("/v1/memory/{key}", api.delete_note, methods=["DELETE"]),
        *(Route(path, page_response, methods=["GET"]) for path in PAGE_FILES),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    return _RequireToken(app, token)


class _RequireToken:
    """Every request but the page's static files needs the bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _is_page(scope):
            headers = dict(scope["headers"])
            header = headers.get(b"authorization")
            given = header.decode("latin-1") if header is not None else None
            if not bearer_matches(given, self._token):
                why = "no" if given is None else "a wrong"
                response = _error(
                    401,
                    f"this request has {why} bearer token: send Authorization: Bearer <token>, "
                    "with the token from the file `logos serve` printed at start",
                )
                response.headers["www-authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _is_page(scope: Scope) -> bool:
    return scope.get("method") == "GET" and scope.get("path") in PAGE_FILES


class _Api:
    def __init__(self, setup: ServerSetup, runs: Runs, approvals: Approvals) -> None:
        self._setup = setup
        self._runs = runs
        self._approvals = approvals
        self._sessions: Sessions = runs.sessions

    # Runs -----------------------------------------------------------------------------------

    async def start_run(self, request: Request) -> Response:
        asked = await self._body(request, RunRequest)
        run = self._runs.start(asked)
        return JSONResponse(
            {"run": run.id, "session": run.session_id, "events": f"/v1/runs/{run.id}/events"},
            status_code=201,
        )

    async def list_runs(self, request: Request) -> Response:
        return JSONResponse({"runs": self._runs.statuses()})

    async def run_status(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        status = self._runs.status(run_id)
        if status is None:
            raise _no_run(run_id)
        return JSONResponse(status)

    async def run_events(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        after = _last_event_id(request)
        keepalive_s = self._setup.settings.keepalive_s
        run = self._runs.get(run_id)
        if run is not None:
            subscription = run.log.subscribe(after)

            async def live() -> AsyncIterator[bytes]:
                yield b"retry: 1000\n\n"
                async for event in subscription.events(keepalive_s):
                    yield b": keep-alive\n\n" if event is None else event.frame()
                if subscription.dropped:
                    yield (
                        b": this stream fell a whole buffer behind the run and was dropped; "
                        b"reconnect with Last-Event-ID to get the rest\n\n"
                    )

            return _event_stream(live())
        path = self._runs.log_path(run_id)
        if path is None:
            raise _no_run(run_id)

        async def saved() -> AsyncIterator[bytes]:
            for event in read_published(path, after):
                yield event.frame()

        return _event_stream(saved())

    async def cancel_run(self, request: Request) -> Response:
        run = self._runs.cancel(request.path_params["run_id"])
        return JSONResponse({"run": run.id, "status": "canceling"}, status_code=202)

    # Approvals ------------------------------------------------------------------------------

    async def list_approvals(self, request: Request) -> Response:
        return JSONResponse(
            {
                "approvals": [
                    {
                        "id": p.id,
                        "run": p.run_id,
                        "command": p.command,
                        "summary": p.summary,
                        "created_at": p.created_at,
                        "expires_at": p.expires_at,
                    }
                    for p in self._approvals.pending()
                ]
            }
        )

    async def decide(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        answer = await self._body(request, ApprovalAnswer)
        try:
            pending = self._approvals.decide(approval_id, answer.approve, answer.reason)
        except UnknownApproval:
            raise ApiError(
                404,
                f"no command waits for approval {approval_id!r}: it was decided already, it "
                "expired, its run ended, or it never existed (GET /v1/approvals lists them)",
            ) from None
        return JSONResponse({"id": pending.id, "run": pending.run_id, "approved": answer.approve})

    # Sessions -------------------------------------------------------------------------------

    async def list_sessions(self, request: Request) -> Response:
        return JSONResponse(
            {
                "sessions": [
                    {**vars(info), "busy": self._sessions.is_busy(info.id)}
                    for info in self._sessions.list()
                ]
            }
        )

    async def get_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            trajectory = self._sessions.load(session_id)
        except UnknownSession:
            raise _no_session(session_id) from None
        except RecordFileError as exc:
            raise ApiError(409, exc.message) from None
        entries: list[dict[str, Any]] = []
        for entry in trajectory.entries:
            if isinstance(entry, BaseModel):
                entries.append(entry.model_dump(mode="json"))
            else:
                entries.append({"type": "step", **step_to_json(entry)})
        return JSONResponse(
            {
                "id": session_id,
                "header": trajectory.header.model_dump(mode="json"),
                "entries": entries,
                "busy": self._sessions.is_busy(session_id),
            }
        )

    async def delete_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            self._sessions.delete(session_id)
        except UnknownSession:
            raise _no_session(session_id) from None
        except SessionBusy:
            raise ApiError(
                409, f"session {session_id!r} has a run going: cancel it first, then delete"
            ) from None
        return Response(status_code=204)

    # Memory ---------------------------------------------------------------------------------

    async def list_notes(self, request: Request) -> Response:
        return JSONResponse({"notes": [vars(note) for note in self._setup.memory.notes()]})

    async def get_note(self, request: Request) -> Response:
        key = request.path_params["key"]
        note = _noted(lambda: self._setup.memory.recall(key))
        if note is None:
            raise _no_note(key)
        return JSONResponse(vars(note))

    async def put_note(self, request: Request) -> Response:
        asked = await self._body(request, NoteRequest)
        key = request.path_params["key"]
        return JSONResponse(vars(_noted(lambda: self._setup.memory.remember(key, asked.text))))

    async def delete_note(self, request: Request) -> Response:
        key = request.path_params["key"]
        if not _noted(lambda: self._setup.memory.forget(key)):
            raise _no_note(key)
        return Response(status_code=204)

    # Bodies ---------------------------------------------------------------------------------

    async def _body(self, request: Request, model: type[M]) -> M:
        """The JSON body as `model`: 415 unless JSON, 413 past the bound, 422 naming every
        bad or unknown field."""
        limit = self._setup.settings.max_body_bytes
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise ApiError(415, "send the body as JSON, with Content-Type: application/json")
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise _too_large(limit)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:  # WHY while reading: a body without a length is bounded too
                raise _too_large(limit)
        try:
            return model.model_validate_json(bytes(body))
        except ValidationError as exc:
            raise ApiError(422, describe_invalid(exc)) from None


def _event_stream(chunks: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        chunks,
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


def _last_event_id(request: Request) -> int:
    text = request.headers.get("last-event-id", "").strip()
    if not text:
        return 0
    if not text.isdigit() or len(text) > 18:
        raise ApiError(
            400,
            f"Last-Event-ID {text[:40]!r} is not an event id: send the `id` of the last event "
            "received (a whole number), or no header to start from the first event",
        )
    return int(text)


def _noted(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except NoteError as exc:
        raise ApiError(400, str(exc)) from None


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"the request body is over {limit} bytes, the most max_body_bytes (in the config "
        "file's [serve] table) allows: send less",
    )


def _no_run(run_id: str) -> ApiError:
    return ApiError(404, f"no run {run_id[:64]!r}: POST /v1/runs starts one")


def _no_session(session_id: str) -> ApiError:
    return ApiError(404, f"no session {session_id[:64]!r}: GET /v1/sessions lists them")


def _no_note(key: str) -> ApiError:
    return ApiError(404, f"no note {key.strip().lower()[:100]!r}: GET /v1/memory lists them")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return _error(exc.status, exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no such route: {request.method} {request.url.path} (see the README's API)"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return _error(exc.status_code, message)


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug: a short message, never a traceback (the server's log has it)."""
    return _error(500, f"internal error ({type(exc).__name__}): this is a bug in logos serve")
