"""Health and upkeep: GET /v1/health (the engine, the image, the caps, the warm pool) and
POST /v1/gc (stray sandboxes removed)."""

from __future__ import annotations

from sandboxd.api import GcResponse, HealthResponse, WarmPathModel, WarmPlacesModel
from sandboxd.backend import BackendError, HealthReport, WarmPlaces
from sandboxd.server.audit import AuditNote
from sandboxd.server.http import Request, Response
from sandboxd.server.routes.common import DaemonState, backend_problem, identity


async def health(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    report = await health_report(daemon, note)
    caller = identity(request.peer)[0]
    places = [_warm_places_model(held, caller) for held in report.pool_places]
    response = HealthResponse.model_validate(
        {**vars(report), "version": daemon.version, "pool_places": places}
    )
    return Response.json(200 if report.ok else 503, response)


async def health_report(daemon: DaemonState, note: AuditNote) -> HealthReport:
    """The backend's report; its problems are the request's error in the audit line."""
    try:
        report = await daemon.backend.health()
    except BackendError as exc:
        raise backend_problem(exc) from None
    if not report.ok:
        note.error = "; ".join(report.problems)
    return report


async def gc(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    try:
        removed = await daemon.backend.gc()
    except BackendError as exc:
        raise backend_problem(exc) from None
    return Response.json(200, GcResponse(removed=removed))


def _warm_places_model(places: WarmPlaces, caller: int) -> WarmPlacesModel:
    """WHY paths for the caller's own specs only: another user's paths are theirs."""
    mounts = places.spec.mounts
    paths = [WarmPathModel(path=mount.path, read_only=mount.read_only) for mount in mounts]
    return WarmPlacesModel(
        uid=places.spec.uid,
        paths=paths if places.spec.uid == caller else None,
        warm=places.warm,
        starting=places.starting,
        memory=places.spec.limits.memory,
        last_claimed_at=places.last_claimed_at,
        kept_warm=places.kept_warm,
    )
