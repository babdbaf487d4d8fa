"""`results.jsonl`: one line per run of a task, appended the moment it ends.

Each line is one write() to a file opened for appending, so a crash or Ctrl-C loses at most
a cut last line (skipped with a warning when read back). A task's latest line says where it
stands: `passed` and `failed` (judged by its check), `error` (it could not be judged: its
workspace, setup, run or node failed) and `canceled` (stopped by Ctrl-C). A re-run skips the
tasks whose latest line is passed, failed or error, and runs canceled ones again;
`--retry-failed` reruns failed and error ones too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field

from logos.agent.steps import StopReason
from logos.jsonl import JsonLinesFile, open_private_append
from logos.providers.base import Usage

_RESULTS_NAME = "results.jsonl"
Status: TypeAlias = Literal["passed", "failed", "error", "canceled"]
_JUDGED: frozenset[Status] = frozenset({"passed", "failed", "error"})
"""Statuses that end a task: a re-run skips it (unless failures are retried)."""
CHECK_OUTPUT_CHARS = 2000
"""The end of a failed check's or setup's output, kept in the line to tell why."""


class TaskResult(BaseModel):
    """How one run of a task ended."""

    # WHY ignore unknown fields: a file written by a newer logos stays readable.
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    attempt: int = Field(ge=1)
    """1 for a task's first run, 2 for the next (after a cancel or --retry-failed)…"""
    status: Status
    stop_reason: StopReason | None = None
    """How the agent's run ended; None when it never started."""
    steps: int = 0
    """Model turns."""
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    wall_s: float = 0.0
    """From the task's start (its workspace) to its end (its check)."""
    error: str | None = None
    check_exit_code: int | None = None
    check_output: str | None = None
    """The end of the check's output when it failed."""
    node: str | None = None
    """Where it ran: this machine's host name, or the Ray node's id."""
    trajectory: str | None = None
    """The run's trajectory, relative to the output directory."""
    started_at: str
    ended_at: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def success(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class PastResults:
    """What earlier runs of a batch wrote in its output directory."""

    latest: dict[str, TaskResult]
    """Each task's latest line."""
    attempts: dict[str, int]
    """How many runs each task had."""
    warnings: tuple[str, ...] = ()

    def is_done(self, task_id: str, *, retry_failed: bool) -> bool:
        previous = self.latest.get(task_id)
        if previous is None or previous.status not in _JUDGED:
            return False
        return previous.status == "passed" or not retry_failed

    def next_attempt(self, task_id: str) -> int:
        return self.attempts.get(task_id, 0) + 1


def read_results(out: Path) -> PastResults:
    """The results file of `out` (none yet: no past results)."""
    path = out / _RESULTS_NAME
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return PastResults({}, {})
    latest: dict[str, TaskResult] = {}
    attempts: dict[str, int] = {}
    warnings = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            result = TaskResult.model_validate_json(raw)
        except ValidationError:
            warnings.append(
                f"{path}, line {number}: skipped, not a result line (cut off by a crash?)"
            )
            continue
        latest[result.id] = result
        attempts[result.id] = max(attempts.get(result.id, 0), result.attempt)
    return PastResults(latest, attempts, tuple(warnings))


class ResultsFile(JsonLinesFile):
    """Appends result lines to `results.jsonl` (created 0600)."""

    @classmethod
    def open(cls, out: Path) -> ResultsFile:
        path = out / _RESULTS_NAME
        results = cls(path, open_private_append(path))
        if not _ends_a_line(path):
            results.write_line("")  # WHY: the next line must not continue a cut one
        return results

    def record(self, result: TaskResult) -> None:
        self.write_line(result.model_dump_json())


def _ends_a_line(path: Path) -> bool:
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return True
        handle.seek(size - 1)
        return handle.read(1) == b"\n"
