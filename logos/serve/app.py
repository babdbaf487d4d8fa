"""The HTTP API (Starlette): routes, the token check, bounded bodies, and errors that say
what was wrong, never a traceback.

    POST   /v1/runs                    start a run → {run, session, events}
    GET    /v1/runs                    the live runs and those finished lately
    GET    /v1/runs/changes            server-sent `runs` events: a run started, published or ended
    GET    /v1/changes                 `runs` and `projects` events: either changed (one stream)
    GET    /v1/runs/{id}               status, usage, cost, stop reason
    GET    /v1/runs/{id}/events        server-sent events; Last-Event-ID replays what was missed
    POST   /v1/runs/{id}/cancel        stop the model, kill the commands, keep what was done
    GET    /v1/approvals               commands waiting for approval, across runs
    POST   /v1/approvals/{id}          {"approve": bool, "reason": "…"}
    POST   /v1/approval-rules          {"command": "…"}: always allow commands like this one
    GET    /v1/runs/{id}/output        ?turn=&index=&stream=stdout|stderr: a command's saved
                                       full output
    GET    /v1/sessions                saved conversations
    GET    /v1/sessions/{id}           one, as its trajectory's records
    DELETE /v1/sessions/{id}
    …      /v1/projects, /v1/hierarchy, /v1/metrics: several agents in one chat
                                       (`logos.serve.projects.routes`)
    GET    /v1/server                  the model, the version, the default directory
    …      /v1/runs/{id}/changes       the files a run changed, and their diffs
                                       (`logos.serve.change_routes`)
    GET    /v1/memory                  the memory notes
    GET|PUT|DELETE /v1/memory/{key}    one note ({"text": "…"} to PUT)
    GET    /                           the page (no data in it: it asks for the token)

Every /v1 request needs `Authorization: Bearer <token>`. Every request must name this server
in `Host` (DNS rebinding) and come from no other `Origin` (`logos.access.guard`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from logos.access.guard import Access, AccessGuard
from logos.access.names import AllowedHosts
from logos.commands.memory_store import NoteError
from logos.errors import RecordFileError
from logos.providers.base import Usage
from logos.providers.pricing import Price, estimate_cost
from logos.records.trajectory import step_to_json
from logos.serve.api import ApiError, ApprovalAnswer, NoteRequest, ServedRunRequest
from logos.serve.approvals import Approvals, RuleBook, RuleRefused, UnknownApproval, too_late
from logos.serve.change_routes import change_routes
from logos.serve.event_hub import Published, read_published
from logos.serve.filechanges.tracker import ChangeTrackers
from logos.serve.http import changes_stream, event_stream, last_event_id, read_body
from logos.serve.page import PAGE_FILES, page_response
from logos.serve.projects.registry import Projects
from logos.serve.projects.routes import project_routes
from logos.serve.runs import Runs
from logos.serve.sessions import SessionBusy, SessionStore, UnknownSession
from logos.serve.setup import RunnerChoice, ServerSetup

M = TypeVar("M", bound=BaseModel)
_USAGE: TypeAdapter[Usage] = TypeAdapter(Usage)
_MAX_OUTPUT_BYTES = 32 * 1024 * 1024
"""The most of a saved output one request returns (the page shows it as text)."""


class RuleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1, max_length=10_000)
    """The command to allow, and others with its program and first argument."""


def build_app(
    setup: ServerSetup,
    token: str,
    runs: Runs,
    approvals: Approvals,
    *,
    hosts: AllowedHosts | None = None,
    rule_book: RuleBook | None = None,
    projects: Projects | None = None,
    trackers: ChangeTrackers | None = None,
) -> ASGIApp:
    """The application; `runs` must be bound to the server's task group before requests.
    `hosts`: the names `Host` may give (None on a Unix socket, which no browser reaches)."""
    api = _Api(setup, runs, approvals, rule_book, projects)
    routes = [
        Route("/v1/runs", api.start_run, methods=["POST"]),
        Route("/v1/runs", api.list_runs, methods=["GET"]),
        Route("/v1/runs/changes", api.run_changes, methods=["GET"]),
        Route("/v1/changes", api.changes, methods=["GET"]),
        Route("/v1/runs/{run_id}", api.run_status, methods=["GET"]),
        Route("/v1/runs/{run_id}/events", api.run_events, methods=["GET"]),
        Route("/v1/runs/{run_id}/cancel", api.cancel_run, methods=["POST"]),
        Route("/v1/runs/{run_id}/output", api.run_output, methods=["GET"]),
        Route("/v1/approvals", api.list_approvals, methods=["GET"]),
        Route("/v1/approvals/{approval_id}", api.decide, methods=["POST"]),
        Route("/v1/approval-rules", api.add_rule, methods=["POST"]),
        Route("/v1/sessions", api.list_sessions, methods=["GET"]),
        Route("/v1/sessions/{session_id}", api.get_session, methods=["GET"]),
        Route("/v1/sessions/{session_id}", api.delete_session, methods=["DELETE"]),
        Route("/v1/memory", api.list_notes, methods=["GET"]),
        Route("/v1/memory/{key}", api.get_note, methods=["GET"]),
        Route("/v1/memory/{key}", api.put_note, methods=["PUT"]),
        Route("/v1/memory/{key}", api.delete_note, methods=["DELETE"]),
        Route("/v1/server", api.server, methods=["GET"]),
        *(project_routes(projects) if projects is not None else []),
        *(change_routes(runs, projects, trackers) if trackers is not None else []),
        *(Route(path, page_response, methods=["GET"]) for path in PAGE_FILES),
    ]
    return guarded(routes, token, "the token from the file `logos serve` printed at start", hosts)


def guarded(
    routes: list[Route], token: str, token_hint: str, hosts: AllowedHosts | None
) -> ASGIApp:
    """`routes` behind the checks every request passes (`logos.access.guard`): it names this
    server in `Host` (when `hosts` is given), comes from no other `Origin`, and carries the
    token (`token_hint`: where a client finds it), but for the page's static files."""
    app = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    return AccessGuard(app, Access(token, token_hint, hosts, open_paths=frozenset(PAGE_FILES)))


class _Api:
    def __init__(
        self,
        setup: ServerSetup,
        runs: Runs,
        approvals: Approvals,
        rule_book: RuleBook | None,
        projects: Projects | None,
    ) -> None:
        self._setup = setup
        self._projects = projects
        self._runs = runs
        self._approvals = approvals
        self._rule_book = rule_book
        self._sessions: SessionStore = runs.sessions
        self._titles: dict[str, str] = {}
        self._tallies: dict[str, LiveTally] = {}

    async def server(self, request: Request) -> Response:
        """What every run and agent of this server uses: its model, and where local commands
        run unless told otherwise; whether the sandbox can run commands now."""
        setup = self._setup
        sandbox = setup.runners.problem(RunnerChoice(sandbox=True))
        return JSONResponse(
            {
                "model": setup.model.model,
                "provider": setup.model.provider,
                "version": setup.logos_version,
                "workdir": setup.workdir,
                "sandbox_problem": sandbox,
                "approval_ttl_s": self._approvals.ttl_s,
            }
        )

    # Runs -----------------------------------------------------------------------------------

    async def start_run(self, request: Request) -> Response:
        asked = await self._body(request, ServedRunRequest)
        run = await self._runs.start(asked)
        return JSONResponse(
            {"run": run.id, "session": run.session_id, "events": f"/v1/runs/{run.id}/events"},
            status_code=201,
        )

    async def list_runs(self, request: Request) -> Response:
        """The statuses, each with its task (its session's first prompt) and, while it runs,
        the steps, tokens and cost its event log shows so far."""
        statuses = self._runs.statuses()
        if any(status["session"] not in self._titles for status in statuses):
            # WHY only titles written: a run's session exists a moment before its prompt is
            # (written as the run starts); an empty title kept here would stay empty.
            self._titles.update(
                (info.id, info.title) for info in self._sessions.list() if info.title
            )
        live = {run.id: run for run in self._runs.live}
        for run_id in list(self._tallies):
            if run_id not in live:
                del self._tallies[run_id]
        for status in statuses:
            status["task"] = self._titles.get(status["session"], "")
            status["model"] = self._setup.model.model
            run = live.get(status["id"])
            if run is not None:
                template = self._setup.template
                tally = self._tallies.setdefault(
                    run.id, LiveTally(run.log.path, template.model_name, template.prices)
                )
                status["live"] = tally.read()
        return JSONResponse({"runs": statuses})

    async def run_changes(self, request: Request) -> Response:
        """Server-sent `runs` events: one at once and one whenever a run starts, publishes or
        ends; the page's runs list reads `GET /v1/runs` on each."""
        return changes_stream({"runs": self._runs.changes}, self._setup.settings.keepalive_s)

    async def changes(self, request: Request) -> Response:
        """Server-sent `runs` and `projects` events, one of each at once and one whenever a
        run or a project changes: what the page's sidebar follows, on one connection."""
        sources = {"runs": self._runs.changes}
        if self._projects is not None:
            sources["projects"] = self._projects.changes
        return changes_stream(sources, self._setup.settings.keepalive_s)

    async def run_status(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        status = self._runs.status(run_id)
        if status is None:
            raise _no_run(run_id)
        return JSONResponse(status)

    async def run_events(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        after = last_event_id(request)
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

            return event_stream(live())
        path = self._runs.log_path(run_id)
        if path is None:
            raise _no_run(run_id)

        async def saved() -> AsyncIterator[bytes]:
            for event in read_published(path, after):
                yield event.frame()

        return event_stream(saved())

    async def cancel_run(self, request: Request) -> Response:
        run = self._runs.cancel(request.path_params["run_id"])
        return JSONResponse({"run": run.id, "status": "canceling"}, status_code=202)

    async def run_output(self, request: Request) -> Response:
        """A command's full output, from the file the runner saved it to (the event has
        only what the model saw). The file is the one the run's own log names."""
        run_id = request.path_params["run_id"]
        path = self._runs.log_path(run_id)
        if path is None:
            raise _no_run(run_id)
        turn, index, stream = output_query(request)
        return output_response(read_published(path, 0), turn, index, stream)

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
        except UnknownApproval as exc:
            raise ApiError(*too_late(approval_id, exc.outcome, self._approvals.ttl_s)) from None
        return JSONResponse({"id": pending.id, "run": pending.run_id, "approved": answer.approve})

    async def add_rule(self, request: Request) -> Response:
        asked = await self._body(request, RuleRequest)
        if self._rule_book is None:
            raise ApiError(409, "this server keeps no approval rules file: add rules by hand")
        try:
            rule = self._rule_book.allow_like(asked.command)
        except RuleRefused as exc:
            raise ApiError(422, str(exc)) from None
        except OSError as exc:
            raise ApiError(
                409, f"cannot write the approval rules file {self._rule_book.path}: {exc}"
            ) from None
        return JSONResponse(
            {
                "name": rule.name,
                "verdict": rule.verdict,
                "program": rule.program,
                "args": list(rule.args),
                "file": str(self._rule_book.path),
            },
            status_code=201,
        )

    # SessionStore -------------------------------------------------------------------------------

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
        return await read_body(request, model, self._setup.settings.max_body_bytes)


class LiveTally:
    """Steps, tokens and cost of a running run, read from its event log as it grows.

    WHY from the log: the run keeps no totals until it ends, and the list of runs should
    show them live for every run, not only for the one a page watches.
    """

    def __init__(self, path: Path, model: str, prices: Mapping[str, Price]) -> None:
        self._path = path
        self._model = model
        self._prices = prices
        self._offset = 0
        self._steps = 0
        self._usage = Usage()
        self._cost_usd = 0.0
        self._cost_known = True

    def read(self) -> dict[str, Any]:
        """The totals after the lines added since the last read (whole lines only)."""
        try:
            with open(self._path, "rb") as handle:
                handle.seek(self._offset)
                added = handle.read()
        except OSError:
            added = b""
        complete = added[: added.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            self._count(line)
        return {
            "steps": self._steps,
            "input_tokens": self._usage.total_input_tokens,
            "output_tokens": self._usage.output_tokens,
            "cost_usd": self._cost_usd if self._cost_known and self._steps else None,
        }

    def _count(self, line: bytes) -> None:
        if b'"type":"step_end"' not in line:
            return  # WHY: most lines are deltas; parse only the steps
        try:
            step = json.loads(line)["event"]["step"]
        except (ValueError, KeyError, TypeError):
            return
        if step.get("role") != "assistant":
            return
        self._steps += 1
        try:
            usage = _USAGE.validate_python(step.get("usage") or {})
        except ValidationError:
            return
        self._usage = self._usage + usage
        # WHY the loop's own estimate: the list shows what the run will report at its end.
        cost = estimate_cost(self._model, usage, self._prices)
        if cost is None:
            self._cost_known = False
        else:
            self._cost_usd += cost


def output_response(
    events: Iterable[Published], turn: int, index: int, stream: Literal["stdout", "stderr"]
) -> Response:
    """The saved output of the command at `turn` and `index` (or of the job it went on as)."""
    saved = _saved_output_file(events, turn, index, stream)
    if saved is None:
        raise ApiError(
            404,
            f"command {index} of turn {turn} has no saved {stream}: all of it is in its event",
        )
    try:
        with open(saved, "rb") as handle:
            data = handle.read(_MAX_OUTPUT_BYTES + 1)
    except OSError as exc:
        raise ApiError(410, f"the saved output {saved} cannot be read: {exc.strerror}") from None
    cut = len(data) > _MAX_OUTPUT_BYTES
    return Response(
        data[:_MAX_OUTPUT_BYTES],
        media_type="text/plain; charset=utf-8",
        headers={
            "x-content-type-options": "nosniff",
            "content-security-policy": "default-src 'none'; sandbox",
            "x-logos-truncated": "true" if cut else "false",
        },
    )


def _saved_output_file(
    events: Iterable[Published], turn: int, index: int, stream: Literal["stdout", "stderr"]
) -> str | None:
    """Where the run's events say the command's `stream` was saved, if anywhere."""
    job_id: str | None = None
    key = f"{stream}_file"
    for event in events:
        if event.type not in ("command_result", "job_end"):
            continue
        data = json.loads(event.data)
        result = data.get("result") or {}
        if event.type == "command_result" and (data.get("turn"), data.get("index")) == (
            turn,
            index,
        ):
            if result.get(key):
                return str(result[key])
            job_id = (result.get("job") or {}).get("id")
        elif event.type == "job_end" and job_id is not None and data.get("id") == job_id:
            return str(result[key]) if result.get(key) else None
    return None


def output_query(request: Request) -> tuple[int, int, Literal["stdout", "stderr"]]:
    query = request.query_params
    turn, index, stream = query.get("turn", ""), query.get("index", ""), query.get("stream")
    if not (turn.isdigit() and index.isdigit() and len(turn) < 10 and len(index) < 10):
        raise ApiError(400, "give turn and index as whole numbers: ?turn=1&index=0&stream=stdout")
    if stream == "stdout":
        return int(turn), int(index), "stdout"
    if stream == "stderr":
        return int(turn), int(index), "stderr"
    raise ApiError(400, "give stream=stdout or stream=stderr")


def _noted(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except NoteError as exc:
        raise ApiError(400, str(exc)) from None


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
