"""temenos's routes, in temenos's shapes: POST /run, GET /health, GET /jobs, GET and DELETE
/jobs/{id}, so a temenos client (logos.temenos) can use sandboxd.

A run is placed and executed as ours are (its sandbox reclaimable: temenos gives every
command a fresh one); a command still running at the config's temenos_background_after_s
goes on as a job, answered with its temenos id. Errors are `{"error": "..."}`
(sandboxd.server.app).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from urllib.parse import parse_qs

from logos.options import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SAVED_OUTPUT_BYTES
from logos.result import Result
from sandboxd.api import (
    TEMENOS_DEFAULT_TIMEOUT_S,
    JobStatus,
    TemenosHealthResponse,
    TemenosJob,
    TemenosRunRequest,
    TemenosRunResponse,
    temenos_job_id,
)
from sandboxd.server.audit import AuditNote
from sandboxd.server.http import Request, Response
from sandboxd.server.routes.common import DaemonState, Problem, identity, parse
from sandboxd.server.routes.execution import Order, Placement, answer, execute
from sandboxd.server.routes.health import health_report
from sandboxd.server.routes.jobs import answer_with_output, find_job
from sandboxd.sessions.jobs import Job

JOBS_PREFIX = "/jobs/"
_STATUSES: dict[str, JobStatus | None] = {
    "": None,
    "all": None,
    "running": "running",
    "completed": "completed",
    "killed": "killed",
}
"""temenos's `status` filter of GET /jobs: "" and "all" take every job."""


async def run(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    body = parse(TemenosRunRequest, request.body)
    paths = body.allowed_paths or ()
    for entry in paths:
        if not entry.path.startswith("/"):
            raise Problem(400, "invalid_path", f"path must be absolute: {entry.path!r}")
    order = Order(
        command=body.command,
        placement=Placement(
            env=dict(body.env or {}),
            # temenos's Linux sandbox mounts nothing for a metadata_only path.
            allowed_paths=[(p.path, p.read_only) for p in paths if not p.metadata_only],
            workdir=None,
            network=bool(body.network),
            unix_sockets=False,
            session=body.session_id(),
            image=None,
            reclaimable=True,
        ),
        timeout_s=body.timeout if body.timeout > 0 else TEMENOS_DEFAULT_TIMEOUT_S,
        max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
        max_saved_output_bytes=DEFAULT_MAX_SAVED_OUTPUT_BYTES,
        background_after_s=daemon.config.temenos_background_after_s,
        caller_id=body.caller_id,
    )
    ran = await execute(daemon, order, request.peer, note)
    with answer(ran) as release:
        if ran.job is not None:
            # temenos's answer: no output until the job ends (GET /jobs/{id}).
            background = TemenosRunResponse(
                stdout="",
                stderr="",
                exit_code=0,
                job_id=temenos_job_id(int(ran.job.id)),
                status="background",
            )
            return Response.json(200, background, exclude_none=True, release=release)
        result = ran.outcome.result
        response = TemenosRunResponse(
            stdout=result.stdout,
            stderr=_stderr(result, killed=False),
            exit_code=result.exit_code if result.exit_code is not None else -1,
            stripped_env_keys=ran.stripped_env_keys or None,
        )
        return Response.json(200, response, exclude_none=True, release=release)


async def health(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    report = await health_report(daemon, note)
    response = TemenosHealthResponse(ok=report.ok, platform=sys.platform, version=daemon.version)
    return Response.json(200 if report.ok else 503, response)


async def jobs(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    """temenos's GET /jobs: the caller's jobs, without output, filtered by `status` and
    `caller_id`."""
    query = parse_qs(request.query)
    status_text = query.get("status", [""])[-1]
    if status_text not in _STATUSES:
        # Go's %q quoting, as temenos words it.
        quoted = json.dumps(status_text[:64], ensure_ascii=False)
        raise Problem(400, "invalid_status", f"invalid job status {quoted}")
    status = _STATUSES[status_text]
    caller_id = query.get("caller_id", [""])[-1]
    await daemon.jobs.prune()
    found = [
        _job_info(job)
        for job in daemon.jobs.of_caller(identity(request.peer)[0])
        if (status is None or job.status == status)
        and (not caller_id or job.caller_id == caller_id)
    ]
    body = b"[" + b",".join(job.model_dump_json(exclude_none=True).encode() for job in found)
    return Response(200, body + b"]", (("content-type", "application/json"),))


async def job(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    found = await find_job(daemon, request, JOBS_PREFIX, note, temenos=True)
    return await _job_answer(daemon, found)


async def kill_job(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    found = await find_job(daemon, request, JOBS_PREFIX, note, temenos=True)
    if found.status != "running":
        raise Problem(409, "job_ended", "job already completed")
    await daemon.jobs.kill(found)
    return await _job_answer(daemon, found)


async def _job_answer(daemon: DaemonState, job: Job) -> Response:
    """temenos's job: no output while it runs; once ended, its whole output (head and
    tail)."""
    if job.backend.end is None:
        return Response.json(200, _job_info(job), exclude_none=True)

    def with_output(result: Result, release: Callable[[], None]) -> Response:
        stderr = _stderr(result, killed=job.kill_requested)
        info = _job_info(job, stdout=result.stdout, stderr=stderr)
        return Response.json(200, info, exclude_none=True, release=release)

    return await answer_with_output(daemon, job, since_background=False, answer=with_output)


def _job_info(job: Job, stdout: str = "", stderr: str = "") -> TemenosJob:
    """temenos's JobInfo: its omitempty fields (a 0 exit code among them) left out."""
    end = job.backend.end
    exit_code = None if end is None else (end.exit_code if end.exit_code is not None else -1)
    ended_at = job.backend.ended_at
    return TemenosJob(
        id=temenos_job_id(int(job.id)),
        caller_id=job.caller_id or None,
        command=job.command,
        status=job.status,
        exit_code=exit_code or None,
        stdout=stdout or None,
        stderr=stderr or None,
        started_at=_rfc3339(job.started_at),
        completed_at=None if ended_at is None else _rfc3339(ended_at),
    )


def _rfc3339(unix_time: float) -> str:
    return dt.datetime.fromtimestamp(unix_time, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stderr(result: Result, *, killed: bool) -> str:
    """The command's stderr, after the one line temenos writes first when its command did
    not end by itself: Go's context error (a kill on request, a timeout) or why it failed."""
    if killed:
        first = "context canceled"
    elif result.timed_out:
        first = "context deadline exceeded"
    elif result.error:
        first = result.error
    else:
        return result.stderr
    return f"{first}\n{result.stderr}"
