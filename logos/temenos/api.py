"""The temenos daemon's JSON, as its client sends and reads it: POST /run, GET /health and
the jobs API (GET /jobs/{id}, DELETE /jobs/{id}).

Answers ignore fields they do not know (a newer daemon may add some) and give absent ones
temenos's zero values, as Go's decoder does (`exit_code` is omitted when it is 0).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

JOB_RUNNING: Literal["running"] = "running"
_JOB_COMPLETED: Literal["completed"] = "completed"
JOB_KILLED: Literal["killed"] = "killed"
BACKGROUND: Literal["background"] = "background"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AllowedPath(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    read_only: bool


class TemenosRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str
    env: dict[str, str]
    allowed_paths: list[AllowedPath]
    network: bool
    timeout: int
    """Whole seconds; 0 asks for the daemon's default."""
    caller_id: str
    auth_token: str = ""


class RunResponse(_Answer):
    """A command that ended (stdout, stderr, exit_code), or one that went on as a job
    (`status` "background" and its `job_id`)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    stripped_env_keys: list[str] | None = None
    job_id: str = ""
    status: str = ""


class JobInfo(_Answer):
    """GET or DELETE /jobs/{id}: a job's state, with its output so far (cut by the daemon)."""

    id: str
    command: str = ""
    status: str
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""


class HealthResponse(_Answer):
    ok: bool
    platform: str = ""
    version: str = ""


class ErrorDetail(_Answer):
    code: str = ""
    message: str


class ErrorResponse(_Answer):
    """temenos's refusals: `{"error": "…"}` (a bad request body gets plain text instead);
    sandboxd's own shape, `{"error": {"code", "message"}}`, is read too."""

    error: str | ErrorDetail

    def message(self) -> str:
        return self.error if isinstance(self.error, str) else self.error.message
