"""The server's wire models: what requests may hold (unknown fields are refused) and the
error every refusal carries."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from logos.approvals.approval import ApprovalMode

MAX_PROMPT_CHARS = 200_000
MAX_REASON_CHARS = 2_000


class ApiError(Exception):
    """A refusal: the status and what was wrong, with what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AllowedPathRequest(_Request):
    path: str = Field(min_length=1, max_length=4096)
    read_only: bool = True


class RunnerRequest(_Request):
    kind: Literal["local", "sandbox"] = "local"
    workdir: str | None = Field(default=None, max_length=4096)
    """local: the working directory (default: the server's)."""
    allowed_paths: list[AllowedPathRequest] = Field(default_factory=list, max_length=64)
    """sandbox: what the sandbox sees; the first is the working directory."""
    network: bool = False
    """sandbox: ask for network access (the sandbox's own config must allow it)."""
    allowed_hosts: list[str] = Field(default_factory=list, max_length=64)
    """sandbox, network off: hosts its commands may reach over HTTP(S) through the sandbox's
    proxy ("pypi.org", "*.example.org"); empty: the server's own --allow-host list."""


class LimitsRequest(_Request):
    """Each may only narrow the server's own limit of the same name."""

    max_steps: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float | None = Field(default=None, gt=0)
    """Per command."""


class RunRequest(_Request):
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    session: str | None = None
    """Continue this session (default: a new one)."""
    runner: RunnerRequest = Field(default_factory=RunnerRequest)
    approval: ApprovalMode | None = None
    """Default: confirm for local commands, auto in the sandbox."""
    limits: LimitsRequest = Field(default_factory=LimitsRequest)


class ApprovalAnswer(_Request):
    approve: bool
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    """Told to the model when the command is denied."""


class NoteRequest(_Request):
    text: str = Field(min_length=1)
