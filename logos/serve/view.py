"""A saved file opened in the page: a trajectory in the run viewer, or a batch's results as
its report. The server answers the same read routes as `logos serve` (the run's events,
its saved outputs, the list with its one run), so the page draws it with the same code.

A trajectory holds steps, not events: each assistant step becomes its reasoning, its prose
and a `command_start` per block; each result step a `command_result` per command; prompts,
approvals, jobs and ends are kept as they are. An approval recorded before its step (it was
decided while the model still wrote) is shown after the step's commands, where it belongs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from logos.access.names import AllowedHosts
from logos.agent.steps import StepMessage
from logos.protocol.parse import parse_cmd_blocks, strip_cmd_blocks
from logos.records.events import (
    ApprovalEvent,
    CommandResultEvent,
    CommandStartEvent,
    DeltaEvent,
    ReasoningDeltaEvent,
    RunSummary,
    StartEvent,
    StepEndEvent,
)
from logos.records.trajectory import PromptRecord, Trajectory
from logos.serve.api import ApiError
from logos.serve.app import guarded, output_query, output_response
from logos.serve.event_hub import Published
from logos.serve.page import PAGE_FILES, page_response

_SAVED_RUN = "saved"
"""The id the page knows the opened trajectory by."""


@dataclass(frozen=True)
class SavedRun:
    """A trajectory as the events the page draws, and its row in the list of runs."""

    events: tuple[Published, ...]
    status: dict[str, Any]


def saved_run(trajectory: Trajectory) -> SavedRun:
    header = trajectory.header
    events: list[BaseModel | dict[str, Any]] = [
        StartEvent(
            provider=header.provider,
            model=header.model,
            runner=header.runner,
            approval="(saved)",
            cwd=header.cwd,
            trajectory=str(trajectory.path),
        )
    ]
    held: list[ApprovalEvent] = []
    turn = 0
    summary: RunSummary | None = None
    task = ""
    for entry in trajectory.entries:
        if isinstance(entry, StepMessage):
            if entry.role == "assistant":
                turn += 1
                events += _assistant_events(turn, entry)
                events += held
                held = []
            else:
                events += held
                held = []
                events += [
                    CommandResultEvent(turn=turn, index=index, result=result)
                    for index, result in enumerate(entry.results)
                ]
            events.append(StepEndEvent(turn=max(turn, 1), step=entry))
        elif isinstance(entry, ApprovalEvent):
            held.append(entry)
        elif isinstance(entry, PromptRecord):
            task = task or entry.content
            events.append({"type": "prompt", "content": entry.content, "time": entry.time})
        else:
            events += held
            held = []
            events.append(entry)
            if isinstance(entry, RunSummary):
                summary = entry
    events += held
    published = tuple(_published(number, event) for number, event in enumerate(events, start=1))
    return SavedRun(published, _status(task, header.started_at, summary))


def _assistant_events(turn: int, step: StepMessage) -> list[BaseModel]:
    events: list[BaseModel] = []
    if step.reasoning:
        events.append(ReasoningDeltaEvent(text=step.reasoning))
    prose = strip_cmd_blocks(step.content)
    if prose:
        events.append(DeltaEvent(text=prose))
    events += [
        CommandStartEvent(turn=turn, index=index, command=command)
        for index, command in enumerate(parse_cmd_blocks(step.content))
    ]
    return events


def _published(number: int, event: BaseModel | dict[str, Any]) -> Published:
    if isinstance(event, BaseModel):
        data = event.model_dump_json()  # as `logos serve` streams it
        kind = str(getattr(event, "type", "event"))
    else:
        data = json.dumps(event, ensure_ascii=False)
        kind = str(event["type"])
    return Published(number, kind, data)


def _status(task: str, started_at: str, summary: RunSummary | None) -> dict[str, Any]:
    ended = summary is not None
    return {
        "id": _SAVED_RUN,
        "task": task,
        "status": "finished" if ended else "interrupted",
        "created_at": started_at,
        "ended_at": None,
        "pending_approvals": [],
        "stop_reason": summary.stop_reason if summary else None,
        "usage": summary.model_dump(mode="json")["usage"] if summary else None,
        "cost_usd": summary.cost_usd if summary else None,
        "turns": summary.turns if summary else None,
        "wall_s": summary.wall_s if summary else None,
    }


def build_view_app(
    token: str, hosts: AllowedHosts | None, run: SavedRun | None, batch: str | None
) -> ASGIApp:
    """The page and the read routes of one saved run, or of one batch's results."""
    runs = [run.status] if run is not None else []

    async def list_runs(request: Request) -> Response:
        return JSONResponse({"runs": runs})

    async def events(request: Request) -> Response:
        found = _the_run(request, run)
        after = _after(request)
        return _frames(found.events, after)

    async def output(request: Request) -> Response:
        found = _the_run(request, run)
        turn, index, stream = output_query(request)
        return output_response(found.events, turn, index, stream)

    async def batch_results(request: Request) -> Response:
        if batch is None:
            raise ApiError(404, "this page shows a saved run, not a batch")
        return Response(batch, media_type="text/plain; charset=utf-8")

    routes = [
        Route("/v1/runs", list_runs, methods=["GET"]),
        Route("/v1/runs/{run_id}/events", events, methods=["GET"]),
        Route("/v1/runs/{run_id}/output", output, methods=["GET"]),
        Route("/v1/batch", batch_results, methods=["GET"]),
        *(Route(path, page_response, methods=["GET"]) for path in PAGE_FILES),
    ]
    return guarded(routes, token, "the token in the URL `logos view` printed", hosts)


def _the_run(request: Request, run: SavedRun | None) -> SavedRun:
    if run is None or request.path_params["run_id"] != _SAVED_RUN:
        raise ApiError(404, f"no run {request.path_params['run_id'][:64]!r}: this page shows one")
    return run


def _after(request: Request) -> int:
    text = request.headers.get("last-event-id", "0").strip() or "0"
    return int(text) if text.isdigit() and len(text) < 18 else 0


def _frames(events: Sequence[Published], after: int) -> StreamingResponse:
    async def frames() -> AsyncIterator[bytes]:
        for event in events:
            if event.id > after:
                yield event.frame()

    return StreamingResponse(
        frames(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
    )


def read_batch_results(path: Path) -> str | None:
    """The text of a batch's results.jsonl, or None when `path` is not one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
            record = json.loads(first)
            if not (isinstance(record, dict) and "attempt" in record and "status" in record):
                return None
            return first + handle.read()
    except (OSError, ValueError):
        return None
