"""`--json`: the run as a stream of JSON events, one per line on stdout, and nothing else.

Every line is one of the models below (parse them with `EVENT_ADAPTER`); the stream always
ends with a `done` event, also when the run could not start. A run that fails (it could not
start, or its `done` has an `error`) sends an `error` event first.
Human messages (warnings, the confirm prompt) go to stderr.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Annotated, Any, Literal, TextIO, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from rich.console import Console

from logos.cli.approval import ApprovalAction, ApprovalDecision
from logos.cli.report import RunInfo, RunSummary
from logos.providers.base import Usage
from logos.result import Result
from logos.steps import StepMessage, StopReason

START = "start"
DELTA = "delta"
REASONING_DELTA = "reasoning_delta"
COMMAND_START = "command_start"
COMMAND_RESULT = "command_result"
STEP_END = "step_end"
RETRY = "retry"
APPROVAL = "approval"
DONE = "done"
ERROR = "error"

EVENT_TYPES = (
    START,
    DELTA,
    REASONING_DELTA,
    COMMAND_START,
    COMMAND_RESULT,
    STEP_END,
    RETRY,
    APPROVAL,
    DONE,
    ERROR,
)


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)


class StartEvent(_Event):
    """The run is set up; the model is about to be called."""

    type: Literal["start"] = "start"
    provider: str
    model: str
    runner: str
    approval: str
    cwd: str
    trajectory: str | None


class DeltaEvent(_Event):
    """Prose as the model writes it (command blocks are not included)."""

    type: Literal["delta"] = "delta"
    text: str


class ReasoningDeltaEvent(_Event):
    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str


class CommandStartEvent(_Event):
    type: Literal["command_start"] = "command_start"
    turn: int
    index: int
    command: str


class CommandResultEvent(_Event):
    type: Literal["command_result"] = "command_result"
    turn: int
    index: int
    result: Result


class StepEndEvent(_Event):
    """A step was added to the conversation (an assistant turn with its usage, or results)."""

    type: Literal["step_end"] = "step_end"
    turn: int
    step: StepMessage


class RetryEvent(_Event):
    type: Literal["retry"] = "retry"
    reason: str
    attempt: int


class ApprovalEvent(_Event):
    type: Literal["approval"] = "approval"
    action: ApprovalAction
    command: str
    edited_command: str | None = None
    reason: str | None = None
    time: str


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    message: str


class DoneEvent(_Event):
    """The last event: why the run stopped, the answer, and what it spent."""

    type: Literal["done"] = "done"
    stop_reason: StopReason
    error: str | None = None
    response: str = ""
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    turns: int = 0
    wall_s: float = 0.0
    trajectory: str | None = None


Event: TypeAlias = Annotated[
    StartEvent
    | DeltaEvent
    | ReasoningDeltaEvent
    | CommandStartEvent
    | CommandResultEvent
    | StepEndEvent
    | RetryEvent
    | ApprovalEvent
    | ErrorEvent
    | DoneEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


class JsonEvents:
    """A Reporter that writes events to `out`, one flushed line each."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        self._out = out
        # WHY soft_wrap: a message is one line however wide, like the events themselves.
        self._err = Console(
            file=err or sys.stderr, highlight=False, markup=False, emoji=False, soft_wrap=True
        )
        self._error_sent = False

    def _emit(self, event: _Event) -> None:
        self._out.write(event.model_dump_json() + "\n")
        self._out.flush()

    def start(self, info: RunInfo) -> None:
        self._emit(StartEvent(**vars(info)))

    def delta(self, text: str) -> None:
        self._emit(DeltaEvent(text=text))

    def reasoning_delta(self, text: str) -> None:
        self._emit(ReasoningDeltaEvent(text=text))

    def command_start(self, turn: int, index: int, command: str) -> None:
        self._emit(CommandStartEvent(turn=turn, index=index, command=command))

    def command_result(self, turn: int, index: int, result: Result) -> None:
        self._emit(CommandResultEvent(turn=turn, index=index, result=result))

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
        self._emit(DoneEvent(**vars(summary)))

    @contextlib.contextmanager
    def prompting(self) -> Iterator[Console]:
        yield self._err
