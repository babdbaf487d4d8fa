"""Jobs: GET /v1/sessions/{id}/jobs, GET and DELETE /v1/jobs/{id}.

A command still running at its background threshold goes on as a job; its run's answer says
so, and these routes report it to its caller only (another caller's job is answered 404,
like an unknown one). temenos's job routes (sandboxd.server.routes.temenos) find jobs here
too.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs

import anyio

from logos.result import Result
from sandboxd.api import (
    API_PREFIX,
    MAX_JOB_WAIT_S,
    JobModel,
    JobResponse,
    JobsResponse,
    job_number_of_temenos_id,
)
from sandboxd.server.audit import AuditNote
from sandboxd.server.http import Request, Response
from sandboxd.server.routes.common import (
    SESSIONS_PREFIX,
    DaemonState,
    Problem,
    identity,
    path_session,
)
from sandboxd.sessions.jobs import Job

JOBS_PREFIX = f"{API_PREFIX}/jobs/"


async def session_jobs(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    session = path_session(request, note)
    if request.path.removeprefix(SESSIONS_PREFIX).partition("/")[2] != "jobs":
        raise Problem(
            404,
            "not_found",
            f"no route {request.path[:200]}: a session's jobs are at "
            f"GET {SESSIONS_PREFIX}{{id}}/jobs",
        )
    await daemon.jobs.prune()
    uid = identity(request.peer)[0]
    jobs = [_job_model(job) for job in daemon.jobs.of_caller(uid) if job.session == session]
    return Response.json(200, JobsResponse(jobs=jobs))


async def job(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    """The job's status and its output since its run's answer; `?wait_s=S` first waits
    up to S seconds for its end."""
    found = await find_job(daemon, request, JOBS_PREFIX, note)
    wait_s = _query_seconds(request, "wait_s", MAX_JOB_WAIT_S)
    if wait_s:
        with anyio.move_on_after(wait_s):
            await found.backend.wait()
    return await _job_answer(daemon, found)


async def kill_job(daemon: DaemonState, request: Request, note: AuditNote) -> Response:
    """Stop the job if it runs, answer its end (as GET does), and forget it."""
    found = await find_job(daemon, request, JOBS_PREFIX, note)
    if found.status == "running":
        await daemon.jobs.kill(found)
    response = await _job_answer(daemon, found)
    await daemon.jobs.forget(found)
    return response


async def _job_answer(daemon: DaemonState, job: Job) -> Response:
    def answer(result: Result, release: Callable[[], None]) -> Response:
        response = JobResponse(**dict(_job_model(job)), result=result)
        return Response.json(200, response, release=release)

    return await answer_with_output(daemon, job, since_background=True, answer=answer)


async def answer_with_output(
    daemon: DaemonState,
    job: Job,
    *,
    since_background: bool,
    answer: Callable[[Result, Callable[[], None]], Response],
) -> Response:
    """`answer(output, release)` of the job's output (see BackendJob.output), marked read:
    its output memory is reserved first and held until the answer is sent (`release`)."""
    reservation = await daemon.reserve_output_memory(job.max_output_bytes)
    try:
        result = await job.backend.output(since_background=since_background)
        await daemon.jobs.mark_read(job)
        return answer(result, reservation.release)
    except BaseException:
        reservation.release()
        raise


async def find_job(
    daemon: DaemonState, request: Request, prefix: str, note: AuditNote, *, temenos: bool = False
) -> Job:
    """The caller's job the path names: by its decimal id, or its temenos id (hex)."""
    named = job_id = request.path.removeprefix(prefix)
    note.job = job_id[:64]
    await daemon.jobs.prune()
    if temenos:
        number = job_number_of_temenos_id(job_id)
        job_id = "" if number is None else str(number)
    found = daemon.jobs.get(job_id, identity(request.peer)[0])
    if found is None:
        raise Problem(
            404,
            "unknown_job",
            f"job not found: there is no job {named[:64]!r} of yours (ended jobs are "
            f"forgotten {daemon.config.finished_job_ttl_s:g} s after their end was read); "
            f"list yours with GET {API_PREFIX}/sessions/{{id}}/jobs or GET /jobs",
        )
    note.session = found.session
    note.command = found.command
    return found


def _job_model(job: Job) -> JobModel:
    return JobModel(
        id=job.id,
        session=job.session,
        command=job.command[:4096],
        status=job.status,
        started_at=job.started_at,
        ended_at=job.backend.ended_at,
        stdout_file=job.stdout_file,
        stderr_file=job.stderr_file,
    )


def _query_seconds(request: Request, name: str, most: float) -> float:
    """A number of seconds from the query string (0 when absent)."""
    values = parse_qs(request.query).get(name)
    if not values:
        return 0.0
    try:
        seconds = float(values[-1])
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= most:
        raise Problem(
            400,
            "invalid_query",
            f"{name}={values[-1][:32]!r} is not a number of seconds from 0 to {most:g}",
        )
    return seconds
