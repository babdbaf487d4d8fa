"""Jobs: commands that go on after their background threshold, on runners that keep them.

A runner that keeps jobs implements `JobRunner` on top of `Runner`; the loop checks for it
with `isinstance` and otherwise never asks for a job (a plain runner ignores
`ExecOptions.background_after_s` and waits for every command).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from logos.result import JobEnd, JobInfo
from logos.runners.base import Runner


@runtime_checkable
class JobRunner(Runner, Protocol):
    """A runner whose commands can go on as jobs.

    `run()` returns a command still running at `ExecOptions.background_after_s` with
    `Result.job` set. A job keeps its command's timeout and ends, at the latest, when the
    runner is closed. Each job's end is handed out once: by `wait_job`, `kill_job` or
    `ended_jobs`, whichever comes first. A job id the runner does not have (or whose end it
    handed out already) raises LookupError, whose message says so.
    """

    async def list_jobs(self) -> list[JobInfo]:
        """The jobs still running."""
        ...

    async def wait_job(self, job_id: str, timeout_s: float) -> JobEnd | None:
        """The job's end once it ends; None when it still runs after `timeout_s`."""
        ...

    async def kill_job(self, job_id: str) -> JobEnd:
        """Stop the job (its whole process group) and return its end."""
        ...

    async def ended_jobs(self) -> list[JobEnd]:
        """The ends of the jobs that ended and whose end was not handed out yet."""
        ...
