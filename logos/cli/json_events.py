"""`--json`: the run as a stream of JSON events (`logos.records.events`), one per line on
stdout, and nothing else. Human messages (warnings, the confirm prompt) go to stderr.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from pydantic import BaseModel
from rich.console import Console

from logos.agent.steps import StepMessage
from logos.approvals.approval import ApprovalDecision
from logos.records.events import (
    ApprovalEvent,
    CommandResultEvent,
    CommandStartEvent,
    DeltaEvent,
    ErrorEvent,
    JobEndEvent,
    JobStartEvent,
    ReasoningDeltaEvent,
    RetryEvent,
    RunSummary,
    StartEvent,
    StepEndEvent,
)
from logos.result import JobEnd, Result


class JsonEvents:
    """A Reporter that writes events to `out`, one flushed line each."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        self._out = out
        # WHY soft_wrap: a message is one line however wide, like the events themselves.
        self._err = Console(
            file=err or sys.stderr, highlight=False, markup=False, emoji=False, soft_wrap=True
        )
        self._error_sent = False

    def _emit(self, event: BaseModel) -> None:
        self._out.write(event.model_dump_json() + "\n")
        self._out.flush()

    def start(self, info: StartEvent) -> None:
        self._emit(info)

    def delta(self, text: str) -> None:
        self._emit(DeltaEvent(text=text))

    def reasoning_delta(self, text: str) -> None:
        self._emit(ReasoningDeltaEvent(text=text))

    def command_start(self, turn: int, index: int, command: str) -> None:
        self._emit(CommandStartEvent(turn=turn, index=index, command=command))

    def command_result(self, turn: int, index: int, result: Result) -> None:
        self._emit(CommandResultEvent(turn=turn, index=index, result=result))
        if result.job is not None:
            self._emit(JobStartEvent.of(turn, index, result))

    def job_end(self, end: JobEnd, seen: bool) -> None:
        self._emit(JobEndEvent.of(end, seen))

    def step_end(self, turn: int, step: StepMessage) -> None:
        self._emit(StepEndEvent(turn=turn, step=step))

    def retry(self, reason: str, attempt: int) -> None:
        self._emit(RetryEvent(reason=reason, attempt=attempt))

    def approval(self, decision: ApprovalDecision) -> None:
        self._emit(ApprovalEvent(**vars(decision)))

    def notice(self, text: str) -> None:
        self._err.print(f"logos: {text}")

    def error(self, message: str) -> None:
        self._error_sent = True
        self._emit(ErrorEvent(message=message))
        self._err.print(f"logos: error: {message}")

    def done(self, summary: RunSummary) -> None:
        if summary.error and not self._error_sent:
            self.error(summary.error)  # a run that failed says so before it ends
        self._emit(summary)

    @contextlib.contextmanager
    def prompting(self) -> Iterator[Console]:
        yield self._err
