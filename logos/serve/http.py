"""What every route of the API shares: bounded JSON bodies read into wire models, and
server-sent event streams with `Last-Event-ID`. Imports Starlette (the optional extra)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import StreamingResponse

from logos.errors import describe_invalid
from logos.serve.api import ApiError
from logos.serve.event_hub import Changes

M = TypeVar("M", bound=BaseModel)


async def read_body(request: Request, model: type[M], limit: int) -> M:
    """The JSON body as `model`: 415 unless JSON, 413 past `limit` bytes, 422 naming every
    bad or unknown field."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(415, "send the body as JSON, with Content-Type: application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:  # WHY while reading: a body without a length is bounded too
            raise too_large(limit)
    try:
        return model.model_validate_json(bytes(body))
    except ValidationError as exc:
        raise ApiError(422, describe_invalid(exc)) from None


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"the request body is over {limit} bytes, the most max_body_bytes (in the config "
        "file's [serve] table) allows: send less",
    )


def event_stream(chunks: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        chunks,
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


_CHANGES_EVERY_S = 0.25
"""A changes stream's events come at most this often: a busy run publishes far faster."""


def changes_stream(sources: Mapping[str, Changes], keepalive_s: float) -> StreamingResponse:
    """Server-sent events named as `sources`' keys: one of each at once, then one whenever
    that source moves on (at most one per `_CHANGES_EVERY_S`): a list follows them and reads
    itself again on each, instead of asking on a timer. WHY one stream for several lists: a
    browser holds six connections to a server, and each page's streams count."""

    def changed(name: str, version: int) -> bytes:
        return f'event: {name}\ndata: {{"version":{version}}}\n\n'.encode()

    async def versions() -> AsyncIterator[bytes]:
        seen = {name: changes.version for name, changes in sources.items()}
        yield b"retry: 1000\n\n" + b"".join(changed(name, seen[name]) for name in sources)
        while not any(changes.closed for changes in sources.values()):
            await anyio.sleep(_CHANGES_EVERY_S)
            if all(changes.version == seen[name] for name, changes in sources.items()):
                with anyio.move_on_after(keepalive_s):
                    async with anyio.create_task_group() as group:
                        for changes in sources.values():
                            group.start_soon(_first_bump, changes, group.cancel_scope)
            if any(changes.closed for changes in sources.values()):
                return
            moved = [name for name, changes in sources.items() if changes.version != seen[name]]
            if not moved:
                yield b": keep-alive\n\n"
            for name in moved:
                seen[name] = sources[name].version
                yield changed(name, seen[name])

    return event_stream(versions())


async def _first_bump(changes: Changes, scope: anyio.CancelScope) -> None:
    await changes.bumped()
    scope.cancel()


def last_event_id(request: Request) -> int:
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
