"""The run's typed events: what a front end shows or sends while a task runs.

The `logos` command prints them with `--json`, one per line; a server can send them as
server-sent events. Both make them with `RunEvents`; parse them with `EVENT_ADAPTER`. A
run's events end with a `done` event (`RunSummary`), also when the run could not start; a
run that fails sends an `error` event first. `ApprovalEvent`, the job events and
`RunSummary` are also trajectory records (`logos.records.trajectory`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, Protocol, TypeAlias

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter

from logos.agent.steps import RunResult, StepMessage, StopReason
from logos.approvals.approval import ApprovalAction, ApprovalDecision
from logos.providers.base import Usage
from logos.result import JobEnd, Result
from logos.runners.live import LivePiece

START = "start"
DELTA = "delta"
_REASONING_DELTA = "reasoning_delta"
_COMMAND_START = "command_start"
_COMMAND_OUTPUT = "command_output"
_COMMAND_RESULT = "command_result"
_STEP_END = "step_end"
_RETRY = "retry"
_APPROVAL = "approval"
_CONFIRM_REQUIRED = "confirm_required"
_JOB_START = "job_start"
_JOB_END = "job_end"
DONE = "done"
ERROR = "error"

EVENT_TYPES = (
    START,
    DELTA,
    _REASONING_DELTA,
    _COMMAND_START,
    _COMMAND_OUTPUT,
    _COMMAND_RESULT,
    _STEP_END,
    _RETRY,
    _APPROVAL,
    _CONFIRM_REQUIRED,
    _JOB_START,
    _JOB_END,
    DONE,
    ERROR,
)


class _Event(BaseModel):
    # WHY ignore unknown fields: a record written by a newer logos of the same trajectory
    # version stays readable (and the trajectory's done record has fields of its own).
    model_config = ConfigDict(extra="ignore", frozen=True)


class StartEvent(_Event):
    """How the run is set up, announced before the model is called."""

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


class CommandOutputEvent(_Event):
    """What a running command printed lately, for watchers; its `command_result` holds what
    counts. Sent only by runners that can tell (the local runner), only for a command still
    running after a moment, and bounded (`logos.runners.live`)."""

    type: Literal["command_output"] = "command_output"
    turn: int
    index: int
    stream: Literal["stdout", "stderr"]
    text: str
    skipped_bytes: int = 0
    """Bytes printed before `text` that are not shown (more came at once than one holds)."""
    last: bool = False
    """No more live output comes for this command (it printed the most that is relayed)."""

    @classmethod
    def of(cls, turn: int, index: int, piece: LivePiece) -> CommandOutputEvent:
        return cls(turn=turn, index=index, **vars(piece))


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


class ConfirmRequiredEvent(_Event):
    """A command waits for someone's approval (a server's client answers it by `id`); the
    `approval` event that follows says what was decided."""

    type: Literal["confirm_required"] = "confirm_required"
    id: str
    command: str
    summary: str
    """The command's first line, shortened: enough to recognise it in a list."""
    expires_at: str
    """UTC, ISO 8601: then it is denied as "expired"."""


class JobStartEvent(_Event):
    """A command went on as a job (its `command_result` has `result.job` set)."""

    type: Literal["job_start"] = "job_start"
    turn: int
    index: int
    id: str
    command: str
    stdout_file: str | None = None
    stderr_file: str | None = None

    @classmethod
    def of(cls, turn: int, index: int, result: Result) -> JobStartEvent:
        assert result.job is not None, "a job start is a result with a job"
        return cls(turn=turn, index=index, command=result.command, **vars(result.job))


class JobEndEvent(_Event):
    """A job ended: shown to the model in the next envelope (`seen`), or stopped by the run
    as it ended (`seen` false)."""

    type: Literal["job_end"] = "job_end"
    id: str
    result: Result
    seen: bool

    @classmethod
    def of(cls, end: JobEnd, seen: bool) -> JobEndEvent:
        return cls(id=end.id, result=end.result, seen=seen)


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    message: str


class RunSummary(_Event):
    """How a run ended: the `done` event, the last of a run, and the trajectory's record
    of a run's end (`TrajectoryWriter.done`), which keeps all but `response` and
    `trajectory` and calls `turns` `steps`."""

    type: Literal["done"] = "done"
    stop_reason: StopReason
    error: str | None = None
    response: str = ""
    """The final answer's prose (the trajectory has it in its last step)."""
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    turns: int = Field(
        default=0, validation_alias=AliasChoices("turns", "steps"), serialization_alias="steps"
    )
    """Model turns; `steps` in a trajectory's record (by alias)."""
    wall_s: float = 0.0
    trajectory: str | None = None
    """The trajectory file of the run, when it has one."""

    @classmethod
    def of(cls, result: RunResult, *, wall_s: float, trajectory: str | None) -> RunSummary:
        return cls(
            stop_reason=result.stop_reason,
            error=result.error,
            response=result.response,
            turns=count_turns(result.steps),
            wall_s=wall_s,
            usage=result.usage,
            cost_usd=result.cost_usd,
            trajectory=trajectory,
        )


Event: TypeAlias = Annotated[
    StartEvent
    | DeltaEvent
    | ReasoningDeltaEvent
    | CommandStartEvent
    | CommandOutputEvent
    | CommandResultEvent
    | StepEndEvent
    | RetryEvent
    | ApprovalEvent
    | ConfirmRequiredEvent
    | JobStartEvent
    | JobEndEvent
    | ErrorEvent
    | RunSummary,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


def count_turns(steps: Sequence[StepMessage]) -> int:
    """Model turns: the assistant steps."""
    return sum(1 for step in steps if step.role == "assistant")


class RunObserver(Protocol):
    """Hears a run's progress. `turn` counts model turns from 1; `index` is the block's
    position within its turn's reply, from 0."""

    def start(self, info: StartEvent) -> None: ...

    def delta(self, text: str) -> None: ...

    def reasoning_delta(self, text: str) -> None: ...

    def command_start(self, turn: int, index: int, command: str) -> None: ...

    def command_output(self, turn: int, index: int, piece: LivePiece) -> None:
        """What a running block's command printed lately (`logos.runners.live`)."""
        ...

    def command_result(self, turn: int, index: int, result: Result) -> None:
        """A block's result; with `result.job` set, its command went on as a job."""
        ...

    def job_end(self, end: JobEnd, seen: bool) -> None:
        """A job ended; `seen`: the model is shown it (else the run stopped it at its end)."""
        ...

    def step_end(self, turn: int, step: StepMessage) -> None: ...

    def retry(self, reason: str, attempt: int) -> None: ...

    def approval(self, decision: ApprovalDecision) -> None: ...

    def error(self, message: str) -> None: ...

    def done(self, summary: RunSummary) -> None: ...


class RunEvents:
    """A `RunObserver` that turns the run's progress into its events, handing each to
    `emit`: the one serialization behind the CLI's `--json` lines and a server's stream."""

    def __init__(self, emit: Callable[[BaseModel], None]) -> None:
        self._emit = emit
        self._error_sent = False

    def start(self, info: StartEvent) -> None:
        self._emit(info)

    def delta(self, text: str) -> None:
        self._emit(DeltaEvent(text=text))

    def reasoning_delta(self, text: str) -> None:
        self._emit(ReasoningDeltaEvent(text=text))

    def command_start(self, turn: int, index: int, command: str) -> None:
        self._emit(CommandStartEvent(turn=turn, index=index, command=command))

    def command_output(self, turn: int, index: int, piece: LivePiece) -> None:
        self._emit(CommandOutputEvent.of(turn, index, piece))

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

    def error(self, message: str) -> None:
        self._error_sent = True
        self._emit(ErrorEvent(message=message))

    def done(self, summary: RunSummary) -> None:
        if summary.error and not self._error_sent:
            self.error(summary.error)  # a run that failed says so before it ends
        self._emit(summary)
