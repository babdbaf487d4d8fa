"""The daemon's jobs: commands that went on past their background threshold, per caller.

Engine-agnostic: a backend hands over a `BackendJob` (which follows its command to its end);
this table gives it an id, remembers whose it is (a caller sees only its own: another's id is
answered like an unknown one), caps how many each caller has, and forgets ended ones once
their retention is over (temenos keeps them 5 minutes after their output was read).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import anyio

from sandboxd.api import JobStatus
from sandboxd.backend import BackendJob

KILL_WAIT_S = 10.0
"""How long a kill waits for the job's end (the supervisor's grace is 1 s)."""


class TooManyJobsError(Exception):
    """The caller has as many jobs as the daemon keeps for one (the message says what to do)."""


@dataclass(eq=False)
class Job:
    """One caller's job."""

    id: str
    uid: int
    session: str
    """The caller's session id (as the caller named it)."""
    command: str
    caller_id: str | None
    """temenos's opaque caller id, for its filter."""
    started_at: float
    """Unix time its command started."""
    timeout_s: float
    max_output_bytes: int
    """Per stream: the most its output answers carry (its run request's limit)."""
    stdout_file: str | None
    """Inside its sandbox: the copies of its whole output."""
    stderr_file: str | None
    backend: BackendJob
    kill_requested: bool = False
    read_at: float | None = None
    """Unix time its output was first read after it ended: its retention counts from then."""

    @property
    def status(self) -> JobStatus:
        end = self.backend.end
        if end is None:
            return "running"
        stopped = end.timed_out or end.signal is not None or end.error is not None
        return "killed" if self.kill_requested or stopped else "completed"

    def mark_read(self) -> None:
        if self.backend.end is not None and self.read_at is None:
            self.read_at = time.time()

    async def kill(self) -> None:
        """Stop it, and wait (a bounded while) for its end."""
        self.kill_requested = True
        await self.backend.kill()
        with anyio.move_on_after(KILL_WAIT_S):
            await self.backend.wait()


class JobTable:
    """Every caller's jobs, by id."""

    def __init__(self, *, max_per_caller: int, retention_s: float) -> None:
        self._max_per_caller = max_per_caller
        self._retention_s = retention_s
        self._jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)

    async def add(
        self,
        backend: BackendJob,
        *,
        uid: int,
        session: str,
        command: str,
        caller_id: str | None,
        started_at: float,
        timeout_s: float,
        max_output_bytes: int,
        stdout_file: str | None,
        stderr_file: str | None,
    ) -> Job:
        """Keep a new job; one over the caller's cap is stopped and refused (TooManyJobsError)."""
        await self.prune()
        if sum(job.uid == uid for job in self._jobs.values()) >= self._max_per_caller:
            await backend.kill()
            await backend.forget()
            raise TooManyJobsError(
                f"the command ran past its background threshold, but you already have "
                f"{self._max_per_caller} jobs (max_jobs_per_caller), so it was stopped: wait "
                "for or stop your running jobs (ended ones are forgotten after "
                f"{self._retention_s:g} s), or run it without background_after_s"
            )
        job = Job(
            id=str(next(self._ids)),
            uid=uid,
            session=session,
            command=command,
            caller_id=caller_id,
            started_at=started_at,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
            backend=backend,
        )
        self._jobs[job.id] = job
        return job

    def get(self, job_id: str, uid: int) -> Job | None:
        """The caller's job `job_id`; None for an unknown id and for another caller's."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.uid == uid else None

    def of_caller(self, uid: int) -> list[Job]:
        return [job for job in self._jobs.values() if job.uid == uid]

    async def forget(self, job: Job) -> None:
        if self._jobs.pop(job.id, None) is not None:
            await job.backend.forget()

    async def prune(self) -> None:
        """Forget the ended jobs whose retention is over."""
        now = time.time()
        for job in list(self._jobs.values()):
            ended_at = job.backend.ended_at
            if ended_at is None:
                continue
            if now - max(ended_at, job.read_at or 0.0) >= self._retention_s:
                await self.forget(job)
