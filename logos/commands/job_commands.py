"""`jobs`, `wait %1` and `kill %1`: the commands the loop answers itself for a run's jobs.

Bash-like, as models know them, and answered the same with local bash and in a sandbox:
only a block that is exactly one of them is taken (a `wait` inside a script is bash's own).
An end they bring is shown after the blocks of the same envelope, like any job's end.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from logos.commands.run_jobs import RunJobs
from logos.options import ExecOptions
from logos.result import JobEnd, JobInfo, Result

_JOB_COMMAND = re.compile(r"\s*(?:(?P<list>jobs)|(?P<verb>wait|kill)\s+%(?P<id>[0-9]{1,12}))\s*")


def job_usage(background_after_s: float) -> tuple[str, ...]:
    """What the system prompt says about jobs, when commands go on as jobs after this long."""
    return (
        f"A command still running after {background_after_s:g} s goes on as a job: its result "
        "gives the job's number and its output so far, and a later result brings its end "
        "(how it ended, its last output, and the files that hold all of it).",
        "`jobs` lists the jobs still running.",
        "`wait %1` waits for job 1 to end (at most the command timeout), then shows its end.",
        "`kill %1` stops job 1 and everything it started.",
    )


class JobCommands:
    """The job commands of one run (a `logos.commands.family.CommandFamily`)."""

    needs_approval = False
    """They start nothing: the commands that became the jobs were approved already."""

    def __init__(self, jobs: RunJobs, background_after_s: float) -> None:
        self._jobs = jobs
        self._background_after_s = background_after_s

    @property
    def usage(self) -> Sequence[str]:
        return job_usage(self._background_after_s)

    def matches(self, command: str) -> bool:
        return _JOB_COMMAND.fullmatch(command) is not None

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.monotonic()
        found = _JOB_COMMAND.fullmatch(command)
        assert found is not None, "run() is asked only for commands that match"
        runner = self._jobs.runner
        if found["list"]:
            return _answer(command, started, _listing(await runner.list_jobs()))
        job_id = found["id"].lstrip("0") or "0"
        try:
            if found["verb"] == "kill":
                end: JobEnd | None = await runner.kill_job(job_id)
            else:
                end = await runner.wait_job(job_id, options.timeout_s)
        except LookupError as unknown:
            return Result(
                command=command,
                error=f"{unknown}: `jobs` lists the jobs still running",
                duration_s=time.monotonic() - started,
            )
        if end is None:
            return _answer(
                command,
                started,
                f"job {job_id} is still running (waited {options.timeout_s:g} s for it): wait "
                f"again, or stop it with `kill %{job_id}`.\n",
            )
        self._jobs.received(end)
        how = "was stopped" if found["verb"] == "kill" else "has ended"
        return _answer(command, started, f"job {job_id} {how}; its end follows the blocks.\n")


def _answer(command: str, started: float, text: str) -> Result:
    return Result(command=command, stdout=text, exit_code=0, duration_s=time.monotonic() - started)


def _listing(jobs: list[JobInfo]) -> str:
    if not jobs:
        return "no job is running.\n"
    lines = []
    for job in sorted(jobs, key=lambda job: int(job.id) if job.id.isdigit() else 0):
        first_line = job.command.strip().splitlines()[0] if job.command.strip() else ""
        lines.append(f"[{job.id}] running for {job.running_s:.0f} s: {first_line}")
    return "\n".join(lines) + "\n"
