"""A run written down as it goes, and reported: what the CLI's task and a server's run share.

`RunRecorder` gives the loop its callbacks: it numbers the model turns, writes each step,
job and approval decision to the trajectory (and each decision to the audit log) before its
`RunObserver` hears of it, so what anyone sees is already saved, and keeps the steps, so
a run cancelled under its loop still ends with a summary of what it spent.
"""

from __future__ import annotations

from collections.abc import Sequence

from logos.agent.config import Callbacks
from logos.agent.steps import RunResult, StepMessage
from logos.approvals.approval import ApprovalDecision
from logos.approvals.audit import AuditLog
from logos.providers.base import Usage
from logos.providers.pricing import estimate_cost
from logos.records.events import JobEndEvent, JobStartEvent, RunObserver, RunSummary
from logos.records.trajectory import TrajectoryWriter
from logos.result import JobEnd, Result
from logos.runners.live import LivePiece


class TurnCounter:
    """Numbers model turns for the events: commands belong to the turn that wrote them."""

    def __init__(self) -> None:
        self.current = 1

    def number_for(self, step: StepMessage) -> int:
        if step.role == "assistant":
            self.current += 1
            return self.current - 1
        return self.current - 1  # results answer the turn that just ended


class RunRecorder:
    """Records one run of `model` in `writer` and `audit`, and reports it to `observer`;
    `audit` None: a run whose commands nobody approves (a batch task's) has nothing to audit."""

    def __init__(
        self,
        writer: TrajectoryWriter,
        audit: AuditLog | None,
        observer: RunObserver,
        *,
        model: str,
    ) -> None:
        self._writer = writer
        self._audit = audit
        self._observer = observer
        self._model = model
        self._steps: list[StepMessage] = []
        self._turns = TurnCounter()

    @property
    def trajectory(self) -> str:
        return str(self._writer.path)

    def callbacks(self) -> Callbacks:
        return Callbacks(
            on_delta=self._observer.delta,
            on_reasoning_delta=self._observer.reasoning_delta,
            on_command_start=self._command_start,
            on_command_result=self._command_result,
            on_command_output=self._command_output,
            on_step_end=self._step_end,
            on_retry=self._observer.retry,
            on_job_end=self._job_end,
        )

    def decided(self, decision: ApprovalDecision) -> None:
        """The approval wrapper's `on_decision`."""
        if self._audit is not None:
            self._audit.record(decision)
        self._writer.approval(decision)
        self._observer.approval(decision)

    def summary(self, result: RunResult | None, wall_s: float) -> RunSummary:
        """How the run ended; `result` None: the loop was cancelled under the run, which
        ends "canceled" with what its recorded steps spent."""
        if result is None:
            usage, cost = _spent(self._steps, self._model)
            result = RunResult("", tuple(self._steps), "canceled", usage=usage, cost_usd=cost)
        return RunSummary.of(result, wall_s=wall_s, trajectory=self.trajectory)

    def done(self, summary: RunSummary) -> None:
        self._writer.done(summary, model=self._model)
        self._observer.done(summary)

    def _step_end(self, step: StepMessage) -> None:
        self._steps.append(step)
        self._writer.step(step)
        self._observer.step_end(self._turns.number_for(step), step)

    def _command_start(self, index: int, command: str) -> None:
        self._observer.command_start(self._turns.current, index, command)

    def _command_output(self, index: int, piece: LivePiece) -> None:
        self._observer.command_output(self._turns.current, index, piece)

    def _command_result(self, index: int, result: Result) -> None:
        if result.job is not None:
            self._writer.job(JobStartEvent.of(self._turns.current, index, result))
        self._observer.command_result(self._turns.current, index, result)

    def _job_end(self, end: JobEnd, seen: bool) -> None:
        self._writer.job(JobEndEvent.of(end, seen))
        self._observer.job_end(end, seen)


def _spent(steps: Sequence[StepMessage], model: str) -> tuple[Usage, float | None]:
    usage = Usage()
    cost: float | None = 0.0
    for step in steps:
        if step.usage is None:
            continue
        usage = usage + step.usage
        step_cost = estimate_cost(model, step.usage)
        cost = None if cost is None or step_cost is None else cost + step_cost
    return usage, cost
