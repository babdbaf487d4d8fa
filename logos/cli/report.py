"""What a run reports while it goes, to either display: people (render) or programs (events)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from rich.console import Console

from logos.agent.steps import StepMessage
from logos.approvals.approval import ApprovalDecision
from logos.records.events import RunSummary, StartEvent
from logos.result import JobEnd, Result


class Reporter(Protocol):
    """Receives the run's progress. `turn` counts model turns from 1; `index` is the
    block's position within its turn's reply, from 0."""

    def start(self, info: StartEvent) -> None: ...

    def delta(self, text: str) -> None: ...

    def reasoning_delta(self, text: str) -> None: ...

    def command_start(self, turn: int, index: int, command: str) -> None: ...

    def command_result(self, turn: int, index: int, result: Result) -> None:
        """A block's result; with `result.job` set, its command went on as a job."""
        ...

    def job_end(self, end: JobEnd, seen: bool) -> None:
        """A job ended; `seen`: the model is shown it (else the run stopped it at its end)."""
        ...

    def step_end(self, turn: int, step: StepMessage) -> None: ...

    def retry(self, reason: str, attempt: int) -> None: ...

    def approval(self, decision: ApprovalDecision) -> None: ...

    def notice(self, text: str) -> None:
        """Something the user should know that is not part of the run (to stderr)."""
        ...

    def error(self, message: str) -> None: ...

    def done(self, summary: RunSummary) -> None: ...

    def prompting(self) -> AbstractContextManager[Console]:
        """Hold the display still while the user answers a question."""
        ...
