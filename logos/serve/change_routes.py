"""What runs and projects changed, over HTTP (Starlette routes, behind the server's checks):

    GET /v1/runs/{id}/changes                the run's files changed: per turn, and in all
    GET /v1/runs/{id}/changes/diff           ?scope=turn|run&key=&root=&path=: one file's diff
    GET /v1/projects/{id}/changes            per reply, per turn, and since the server started
    GET /v1/projects/{id}/changes/diff       ?scope=reply|turn|project&key=&root=&path=

Each step's list is read from the event log (it outlives the server); the whole run's or
project's list and every diff need the snapshots, which live as long as the server (and
only for the latest finished runs): without them the answer says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from logos.serve.api import ApiError
from logos.serve.filechanges.tracker import ChangeTracker, ChangeTrackers, DiffUnavailable
from logos.serve.filechanges.wire import ChangeList, ChangeScope, FilesChanged
from logos.serve.projects.registry import Projects
from logos.serve.projects.turns import Project
from logos.serve.runs import Runs

_MAX_QUERY_CHARS = 4096
_GONE = (
    "the snapshots behind these diffs are gone (they live while the server that took them "
    "runs, for its latest runs): each step's list of files stays"
)
_WHOLE: dict[str, ChangeScope] = {"run": "run", "project": "project"}


def change_routes(runs: Runs, projects: Projects | None, trackers: ChangeTrackers) -> list[Route]:
    api = _ChangesApi(runs, projects, trackers)
    routes = [
        Route("/v1/runs/{owner}/changes", api.run_changes, methods=["GET"]),
        Route("/v1/runs/{owner}/changes/diff", api.run_diff, methods=["GET"]),
    ]
    if projects is not None:
        routes += [
            Route("/v1/projects/{owner}/changes", api.project_changes, methods=["GET"]),
            Route("/v1/projects/{owner}/changes/diff", api.project_diff, methods=["GET"]),
        ]
    return routes


class _ChangesApi:
    def __init__(self, runs: Runs, projects: Projects | None, trackers: ChangeTrackers) -> None:
        self._runs = runs
        self._projects = projects
        self._trackers = trackers

    async def run_changes(self, request: Request) -> Response:
        run_id = request.path_params["owner"]
        tracker = self._trackers.get(run_id)
        steps = _published(self._run_log(run_id))
        whole = await _whole(tracker, "run")
        return JSONResponse(
            {
                "run": whole.model_dump(mode="json") if whole else None,
                "turns": [s.model_dump(mode="json") for s in steps if s.scope == "turn"],
                "roots": tracker.roots if tracker else [],
                "kept": tracker is not None,
                "note": "" if tracker is not None else _GONE,
            }
        )

    async def run_diff(self, request: Request) -> Response:
        run_id = request.path_params["owner"]
        self._run_log(run_id)
        return await _diff(self._trackers.get(run_id), request, ("turn", "run"))

    async def project_changes(self, request: Request) -> Response:
        project = self._project(request.path_params["owner"])
        tracker = self._trackers.get(project.record.id)
        steps = _published(project.log.path)
        whole = await _whole(tracker, "project")
        return JSONResponse(
            {
                "project": whole.model_dump(mode="json") if whole else None,
                "turns": [s.model_dump(mode="json") for s in steps if s.scope == "turn"],
                "replies": [s.model_dump(mode="json") for s in steps if s.scope == "reply"],
                "roots": tracker.roots if tracker else [],
                "kept": tracker is not None,
                "note": "" if tracker is not None else _GONE,
            }
        )

    async def project_diff(self, request: Request) -> Response:
        project = self._project(request.path_params["owner"])
        tracker = self._trackers.get(project.record.id)
        return await _diff(tracker, request, ("reply", "turn", "project"))

    def _run_log(self, run_id: str) -> Path:
        path = self._runs.log_path(run_id)
        if path is None:
            raise ApiError(404, f"no run {run_id[:64]!r}: GET /v1/runs lists them")
        return path

    def _project(self, project_id: str) -> Project:
        assert self._projects is not None, "the project routes exist only with projects"
        return self._projects.get(project_id)


async def _whole(tracker: ChangeTracker | None, scope: ChangeScope) -> ChangeList | None:
    """Everything changed since the first snapshot (None: no snapshots kept)."""
    if tracker is None:
        return None
    if tracker.first is None or tracker.latest is None or tracker.first == tracker.latest:
        return ChangeList(scope=scope, key="")
    return await tracker.span(scope, "", tracker.first, tracker.latest)


async def _diff(
    tracker: ChangeTracker | None, request: Request, scopes: tuple[str, ...]
) -> Response:
    query = request.query_params
    scope, key = query.get("scope", ""), query.get("key", "")
    root, path = query.get("root", ""), query.get("path", "")
    if scope not in scopes or not root or not path:
        raise ApiError(
            400,
            f"give scope ({' or '.join(scopes)}), key, root and path: the scope and key of a "
            "list of changed files, and the root and path of one of its files",
        )
    if max(len(key), len(root), len(path)) > _MAX_QUERY_CHARS:
        raise ApiError(400, f"key, root and path hold at most {_MAX_QUERY_CHARS} characters")
    if tracker is None:
        raise ApiError(410, _GONE)
    listed_scope: ChangeScope = _WHOLE.get(scope) or ("turn" if scope == "turn" else "reply")
    if scope in _WHOLE and tracker.listed(listed_scope, "") is None:
        await _whole(tracker, listed_scope)
    try:
        diff = await tracker.diff(listed_scope, key, root, path)
    except DiffUnavailable as exc:
        raise ApiError(410, str(exc)) from None
    return JSONResponse(diff.model_dump(mode="json"))


def _published(path: Path) -> list[FilesChanged]:
    """The `files_changed` events of a log (only those lines are parsed)."""
    found: list[FilesChanged] = []
    try:
        with open(path, "rb") as handle:
            for line in handle:
                if b'"type":"files_changed"' not in line:
                    continue
                try:
                    found.append(FilesChanged.model_validate(json.loads(line)["event"]))
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        return []
    return found
