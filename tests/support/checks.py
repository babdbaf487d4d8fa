"""What the reply checks' own tests share: a run's state and a command's result."""

from __future__ import annotations

from typing import Any

from logos.agent.checks.base import RunState
from logos.result import Result


def run_state(**changes: Any) -> RunState:
    """A run of the task "go" that has run no command yet, with `changes`."""
    fields: dict[str, Any] = {"task": "go", "jobs": None, "ran_commands": False, "acted": False}
    return RunState(**{**fields, **changes})


def ran(command: str = "true", stdout: str = "", exit_code: int = 0) -> Result:
    return Result(command=command, stdout=stdout, exit_code=exit_code)
