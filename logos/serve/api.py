"""The server's wire models: what requests may hold (unknown fields are refused) and the
error every refusal carries."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from logos.approvals.approval import ApprovalMode
from logos.options.declarations import options_at
from logos.options.option import Place, fields_at

_MAX_PROMPT_CHARS = 200_000
_MAX_REASON_CHARS = 2_000


class ApiError(Exception):
    """A refusal: the status and what was wrong, with what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunnerFields(_Request):
    """Where a run's commands run; with the options a run's runner may ask for
    (`logos.options.declarations`, `Place.SERVE_RUNNER`: for the sandbox, its paths, network
    and hosts, each only narrowing the server's)."""

    kind: Literal["local", "sandbox"] = "local"
    workdir: str | None = Field(default=None, max_length=4096)
    """local: the working directory (default: the server's)."""


RunnerRequest = Annotated[
    RunnerFields, fields_at(RunnerFields, Place.SERVE_RUNNER, options_at(Place.SERVE_RUNNER))
]


class LimitsFields(_Request):
    """The limits a run may ask for (`Place.SERVE_LIMITS`): each only narrows the server's."""


LimitsRequest = Annotated[
    LimitsFields, fields_at(LimitsFields, Place.SERVE_LIMITS, options_at(Place.SERVE_LIMITS))
]


class ServedRunRequest(_Request):
    prompt: str = Field(min_length=1, max_length=_MAX_PROMPT_CHARS)
    session: str | None = None
    """Continue this session (default: a new one)."""
    runner: RunnerRequest = Field(default_factory=dict, validate_default=True)
    approval: ApprovalMode | None = None
    """Default: confirm for local commands, auto in the sandbox."""
    limits: LimitsRequest = Field(default_factory=dict, validate_default=True)


class ApprovalAnswer(_Request):
    approve: bool
    reason: str | None = Field(default=None, max_length=_MAX_REASON_CHARS)
    """Told to the model when the command is denied."""


class NoteRequest(_Request):
    text: str = Field(min_length=1)
