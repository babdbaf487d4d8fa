"""The jobs of one run: the ends the model has not seen yet, and those still running.

The loop shows each end in the next `<result>` envelope it sends, and stops the jobs still
running when the run ends, whatever ends it: a run never leaves a job behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio

from logos.callback import invoke_callback
from logos.result import JobEnd, JobInfo
from logos.runners.job_runner import JobRunner

OnJobEnd = Callable[[JobEnd, bool], Awaitable[None] | None]
"""A job ended: its end, and whether the model was shown it (False: the run stopped it as
the run ended)."""


class RunJobs:
    """The jobs a run's runner keeps, seen from the run."""

    def __init__(self, runner: JobRunner, on_end: OnJobEnd | None = None) -> None:
        self.runner = runner
        self._on_end = on_end
        self._unseen: list[JobEnd] = []
        self.ends: list[JobEnd] = []
        """Every end the run learned, in order (`RunResult.jobs`)."""

    def received(self, end: JobEnd) -> None:
        """An end taken from the runner (by `wait` or `kill`), for the next envelope."""
        self._unseen.append(end)
        self.ends.append(end)

    async def has_news(self) -> bool:
        """Whether jobs still run, or ended without the model being shown their end."""
        await self._collect()
        return bool(self._unseen) or bool(await self.runner.list_jobs())

    async def take_unseen(self) -> list[JobEnd]:
        """The ends the model has not seen, now to be shown; each is taken once."""
        await self._collect()
        taken, self._unseen = self._unseen, []
        for end in taken:
            await invoke_callback(self._on_end, end, True)
        return taken

    async def running(self) -> list[JobInfo]:
        return await self.runner.list_jobs()

    async def stop_all(self) -> None:
        """Stop every job still running (the run is ending); their ends, and the ends the
        model was not shown, are recorded as not seen."""
        stopped: list[JobEnd] = []

        async def stop(job: JobInfo) -> None:
            with contextlib.suppress(LookupError):  # it ended meanwhile: collected below
                stopped.append(await self.runner.kill_job(job.id))

        async with anyio.create_task_group() as stopping:
            for job in await self.runner.list_jobs():
                stopping.start_soon(stop, job)
        await self._collect()
        self.ends += stopped
        unseen, self._unseen = self._unseen, []
        for end in [*unseen, *stopped]:
            await invoke_callback(self._on_end, end, False)

    async def _collect(self) -> None:
        for end in await self.runner.ended_jobs():
            self.received(end)
