"""The daemon's jobs: commands that went on past their background threshold, per caller.

Engine-agnostic: a backend hands over a `BackendJob` (which follows its command to its end);
this table gives it an id, remembers whose it is (a caller sees only its own: another's id is
answered like an unknown one), caps how many each caller has, and forgets ended ones once
their retention is over (temenos keeps them 5 minutes after their output was read). With a
store (sandboxd.sessions.job_store), a daemon that keeps its sandboxes across restarts keeps
its jobs too: the next one takes them over under the same ids (`restore`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio

from logos.errors import RecordFileError
from logos.result import Result
from sandboxd.api import JobStatus
from sandboxd.backend import AdoptedJobs, BackendJob, JobKey
from sandboxd.sessions.job_store import JobRecord, JobStore

logger = logging.getLogger(__name__)

_KILL_WAIT_S = 10.0
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

    def record(self) -> JobRecord:
        key = self.backend.key
        return JobRecord(
            id=self.id,
            uid=self.uid,
            session=self.session,
            command=self.command,
            caller_id=self.caller_id,
            started_at=self.started_at,
            timeout_s=self.timeout_s,
            max_output_bytes=self.max_output_bytes,
            stdout_file=self.stdout_file,
            stderr_file=self.stderr_file,
            sandbox=key.sandbox,
            number=key.number,
            kill_requested=self.kill_requested,
            read_at=self.read_at,
        )


class EndedJob:
    """A job whose sandbox was not taken over by this daemon: it ended with it, and `end`
    says why (a `BackendJob` that only answers that)."""

    def __init__(self, key: JobKey, command: str, why: str) -> None:
        self._key = key
        self._end = Result(command=command, error=why)
        self._ended_at = time.time()

    @property
    def key(self) -> JobKey:
        return self._key

    @property
    def end(self) -> Result:
        return self._end

    @property
    def ended_at(self) -> float:
        return self._ended_at

    async def wait(self) -> None:
        return

    async def output(self, since_background: bool) -> Result:
        return replace(self._end, error=f"its output is no longer available: {self._end.error}")

    async def kill(self) -> None:
        return

    async def forget(self) -> None:
        return


class JobTable:
    """Every caller's jobs, by id."""

    def __init__(
        self, *, max_per_caller: int, retention_s: float, store: JobStore | None = None
    ) -> None:
        """`store`: where the jobs are kept for the next daemon (None: in memory only)."""
        self._max_per_caller = max_per_caller
        self._retention_s = retention_s
        self._store = store
        self._jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)

    async def restore(self, adopted: AdoptedJobs) -> None:
        """Take over the jobs the daemon before kept, with what their backend took over
        (each under its id; one whose sandbox is gone ends with why); the backend's jobs
        nobody kept (the daemon died before it kept them) are stopped and forgotten."""
        if self._store is None:
            return
        records, last = await anyio.to_thread.run_sync(self._store.load)
        self._ids = itertools.count(last + 1)
        for record in records:
            backend = adopted.take(record.key, record.command)
            if backend is None:
                why = adopted.lost.get(record.sandbox) or (
                    "its sandbox no longer knows it (it ended long ago, or its sandbox was "
                    "removed while no daemon ran)"
                )
                backend = EndedJob(record.key, record.command, f"it ended with its sandbox: {why}")
            fields = record.model_dump(exclude={"sandbox", "number"})
            self._jobs[record.id] = Job(**fields, backend=backend)
        await adopted.release_rest()
        if records:
            logger.info("took over %d jobs of the daemon before", len(records))

    async def mark_read(self, job: Job) -> None:
        """Its output was read: once it ended, its retention counts from the first time."""
        if job.backend.end is not None and job.read_at is None:
            job.read_at = time.time()
            await self._save(job)

    async def kill(self, job: Job) -> None:
        """Stop it, and wait (a bounded while) for its end."""
        job.kill_requested = True
        await self._save(job)
        await job.backend.kill()
        with anyio.move_on_after(_KILL_WAIT_S):
            await job.backend.wait()

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
        if self._store is not None:
            await self._keep(self._store.save_last_id, int(job.id))
        await self._save(job)
        return job

    def get(self, job_id: str, uid: int) -> Job | None:
        """The caller's job `job_id`; None for an unknown id and for another caller's."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.uid == uid else None

    def of_caller(self, uid: int) -> list[Job]:
        return [job for job in self._jobs.values() if job.uid == uid]

    async def forget(self, job: Job) -> None:
        if self._jobs.pop(job.id, None) is not None:
            if self._store is not None:
                await self._keep(self._store.remove, job.id)
            await job.backend.forget()

    async def _save(self, job: Job) -> None:
        if self._store is not None:
            await self._keep(self._store.save, job.record())

    async def _keep(self, write: Callable[[Any], None], what: object) -> None:
        """A write to the store, on a thread; a failure is logged (the job goes on: only a
        restart of the daemon would not find it)."""
        try:
            await anyio.to_thread.run_sync(write, what)
        except (OSError, RecordFileError) as exc:
            logger.warning("cannot keep the daemon's jobs in its state directory: %s", exc)

    async def prune(self) -> None:
        """Forget the ended jobs whose retention is over."""
        now = time.time()
        for job in list(self._jobs.values()):
            ended_at = job.backend.ended_at
            if ended_at is None:
                continue
            if now - max(ended_at, job.read_at or 0.0) >= self._retention_s:
                await self.forget(job)
