"""Approval: who decides whether each of the model's commands runs.

Modes: `auto` runs everything, `confirm` asks someone (the `logos` command asks at the
terminal; a server would ask its client), `never-run` runs nothing (a dry run). Approval is
a Runner wrapper (`ApprovalRunner`), so the loop does not know it exists: a declined
command simply comes back as a `Result` with `error` set. Commands the loop answers itself
(`logos.commands.family`) whose family asks for approval go through `run_approved`; a wrapped
runner that keeps jobs keeps them through its wrapper too.

What the model sees for each decision:

* yes / always / auto: the command's real result.
* no: `Result.error` = "the user declined to run this command: <reason>".
* never-run: `Result.error` = "not run: approval mode never-run".
* edit: the edited command runs; `Result.command` is the edited text (so the `$` line of
  the envelope shows what really ran) and stderr starts with `EDITED_NOTE`, because an
  edit inside a multi-line command would not show in the envelope's first-line preview.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeAlias

from logos.callback import invoke_callback
from logos.jsonl import utc_now
from logos.options import ExecOptions
from logos.result import JobEnd, JobInfo, Result
from logos.runners.base import Runner
from logos.runners.job_runner import JobRunner

ApprovalMode: TypeAlias = Literal["auto", "confirm", "never-run"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("auto", "confirm", "never-run")
ApprovalAction: TypeAlias = Literal["auto", "yes", "no", "always", "edit", "never-run"]

NEVER_RUN_ERROR = "not run: approval mode never-run"
DECLINED_ERROR = "the user declined to run this command"
EDITED_NOTE = "[logos: the user edited this command before it ran; the $ line shows what ran]\n"


@dataclass(frozen=True)
class ApprovalDecision:
    """One decision about one command, as the audit log and the trajectory record it."""

    action: ApprovalAction
    command: str
    """What the model asked to run."""
    edited_command: str | None = None
    """What ran instead, after an `edit`."""
    reason: str | None = None
    time: str = field(default_factory=utc_now)
    """UTC, ISO 8601."""


class Approver(Protocol):
    """Decides whether one command runs: a fixed rule, or a person asked (at a terminal,
    or through a server's client)."""

    async def decide(self, command: str) -> ApprovalDecision: ...


OnDecision = Callable[[ApprovalDecision], Awaitable[None] | None]


class ApprovalRunner(Runner):
    """Asks `approver` about each command, then runs it on `inner` or explains why not.

    `on_decision` sees every decision first (the audit log and the trajectory use it). When
    `inner` keeps jobs, so does the wrapper (it is then a `logos.runners.job_runner.JobRunner`):
    waiting for a job, stopping one or listing them asks nobody, as they start no command.
    """

    def __new__(
        cls, inner: Runner, approver: Approver, on_decision: OnDecision | None = None
    ) -> ApprovalRunner:
        if cls is ApprovalRunner and isinstance(inner, JobRunner):
            return super().__new__(_JobApprovalRunner)
        return super().__new__(cls)

    def __init__(
        self, inner: Runner, approver: Approver, on_decision: OnDecision | None = None
    ) -> None:
        self.inner = inner
        self._approver = approver
        self._on_decision = on_decision

    async def run(self, command: str, options: ExecOptions) -> Result:
        async def on_inner(approved: str) -> Result:
            return await self.inner.run(approved, options)

        return await self.run_approved(command, on_inner)

    async def run_approved(
        self, command: str, answer: Callable[[str], Awaitable[Result]]
    ) -> Result:
        """Ask about `command`; if it may run, `answer` it (as edited, after an edit)."""
        decision = await self._approver.decide(command)
        await invoke_callback(self._on_decision, decision)
        if decision.action == "never-run":
            return Result(command=command, error=NEVER_RUN_ERROR)
        if decision.action == "no":
            return Result(command=command, error=declined_error(decision.reason))
        if decision.action == "edit" and decision.edited_command is not None:
            result = await answer(decision.edited_command)
            return replace(
                result, command=decision.edited_command, stderr=EDITED_NOTE + result.stderr
            )
        return await answer(command)

    async def prepare(self, options: ExecOptions) -> None:
        """Prepare the inner runner: getting ready runs no command, so it needs no approval."""
        await self.inner.prepare(options)

    async def aclose(self) -> None:
        """Close the inner runner (kills leftover background jobs, ends a sandbox session)."""
        await self.inner.aclose()


class _JobApprovalRunner(ApprovalRunner):
    """An ApprovalRunner around a runner that keeps jobs."""

    inner: JobRunner

    async def list_jobs(self) -> list[JobInfo]:
        return await self.inner.list_jobs()

    async def wait_job(self, job_id: str, timeout_s: float) -> JobEnd | None:
        return await self.inner.wait_job(job_id, timeout_s)

    async def kill_job(self, job_id: str) -> JobEnd:
        return await self.inner.kill_job(job_id)

    async def ended_jobs(self) -> list[JobEnd]:
        return await self.inner.ended_jobs()


def declined_error(reason: str | None) -> str:
    reason = (reason or "").strip()
    return f"{DECLINED_ERROR}: {reason}" if reason else f"{DECLINED_ERROR} (no reason given)"


class AutoApprover:
    """Runs everything (the sandbox default, or `--yes`)."""

    async def decide(self, command: str) -> ApprovalDecision:
        return ApprovalDecision("auto", command)


class NeverRunApprover:
    """Runs nothing: a dry run that shows what the model would do."""

    async def decide(self, command: str) -> ApprovalDecision:
        return ApprovalDecision("never-run", command)
