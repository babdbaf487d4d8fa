"""An answer given while jobs still run, or before their end was shown: answered once with
the list of them (`logos.protocol.notices.running_jobs_notice`, or the envelope of their
ends); the answer given again stands, and the run stops what is left."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import running_jobs_notice


class RunningJobs:
    def __init__(self) -> None:
        self.told = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        # WHY not on the last turn: with no turn left to answer it, the notice would only
        # lose the answer.
        jobs = run.jobs
        if jobs is None or not reply.is_answer or self.told or run.last_turn:
            return None
        if not await jobs.has_news():
            return None
        self.told = True
        running = await jobs.running()
        raise AskAgain(running_jobs_notice(running) if running else None)
