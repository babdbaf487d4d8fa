"""The task file: one JSON object per line, each a task for the agent and how to judge it.

    {"id": "fix-add", "prompt": "make the tests pass",
     "workspace": {"copy": "examples/calc"},          or {"git": URL, "rev": "main"}
     "setup": "pip install -e .", "check": "python -m pytest -q",
     "max_steps": 20, "max_time": 300, "max_cost": 0.5, "image": "python:3.12"}

`id`, `prompt` and `workspace` are required; a relative directory (to copy, or a repository
on disk) is relative to the task file. A bad line (not JSON, an unknown or missing field, a
duplicate id) is reported with its line number and skipped: one typo never stops the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from logos.agent.config import RunLimits
from logos.errors import MessageError, describe_problem

_TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
"""Ids name files (trajectories, workspaces): letters, digits, `_`, `.`, `-`."""

TaskId = Annotated[str, StringConstraints(pattern=_TASK_ID_PATTERN)]
Revision = Annotated[str, StringConstraints(pattern=r"^[^-\s]\S*$")]
"""A branch, tag or commit (never an option: it is passed to git)."""
Command = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]


class _Strict(BaseModel):
    # WHY forbid: a misspelt key ("chekc") must be reported, not silently ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class CopyWorkspace(_Strict):
    """A directory copied afresh for each run of the task."""

    # WHY an alias: `copy` is a BaseModel method.
    directory: str = Field(alias="copy", min_length=1)


class GitWorkspace(_Strict):
    """A repository cloned afresh for each run of the task, at `rev` (default: its HEAD)."""

    git: str = Field(min_length=1)
    rev: Revision | None = None


class TaskSpec(_Strict):
    """One task: what the agent is asked, where it works, and how its work is judged."""

    id: TaskId
    prompt: str = Field(min_length=1)
    workspace: CopyWorkspace | GitWorkspace
    setup: Command | None = None
    """Runs in the fresh workspace before the agent; a failure ends the task as an error."""
    check: Command | None = None
    """Runs after the agent, where it ran; exit 0 is success. Without one, success is the
    agent's final answer."""
    max_steps: int | None = Field(default=None, ge=1)
    max_time: float | None = Field(default=None, gt=0)
    """Seconds of the agent's run (the wall-clock limit)."""
    max_cost: float | None = Field(default=None, gt=0)
    """US dollars of the agent's run."""
    image: str | None = Field(default=None, min_length=1)
    """The sandbox image (needs --sandbox)."""

    def limits(self, batch: RunLimits) -> RunLimits:
        """The batch's limits, with the task's own where it sets them."""
        return replace(
            batch,
            max_steps=self.max_steps or batch.max_steps,
            max_wall_s=self.max_time or batch.max_wall_s,
            max_cost_usd=self.max_cost or batch.max_cost_usd,
        )


@dataclass(frozen=True)
class LineProblem:
    """A line of the task file that was skipped, and why."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class TaskFile:
    path: Path
    tasks: tuple[TaskSpec, ...]
    problems: tuple[LineProblem, ...]


class TaskFileError(MessageError):
    """The task file cannot be read at all."""


def read_task_file(path: Path) -> TaskFile:
    """The tasks of `path`, with relative `copy` directories made absolute; the lines that
    could not be used are in `problems`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TaskFileError(
            f"cannot read the task file {path}: {exc.strerror or exc}: give a JSONL file, "
            "one task per line"
        ) from None
    base = path.resolve().parent
    tasks: list[TaskSpec] = []
    problems: list[LineProblem] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            task = _parse_line(raw)
        except ValueError as exc:
            problems.append(LineProblem(number, str(exc)))
            continue
        if task.id in seen:
            problems.append(
                LineProblem(
                    number,
                    f"duplicate id {task.id!r} (first on line {seen[task.id]}): give each "
                    "task its own id",
                )
            )
            continue
        seen[task.id] = number
        tasks.append(_anchored(task, base))
    return TaskFile(path=path, tasks=tuple(tasks), problems=tuple(problems))


def _parse_line(raw: bytes) -> TaskSpec:
    try:
        value = json.loads(raw)
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError('not a JSON object: each line is one task, {"id": …, "prompt": …}')
    try:
        return TaskSpec.model_validate(value)
    except ValidationError as exc:
        raise ValueError(_describe(exc, value)) from None


def _describe(exc: ValidationError, value: dict[str, object]) -> str:
    problems = []
    for error in exc.errors():
        location = [str(part) for part in error["loc"]]
        if location[:1] == ["workspace"]:
            # WHY: the union reports every alternative; say what a workspace looks like.
            problems.append(
                'workspace: give {"copy": DIR} or {"git": URL, "rev": REV}'
                if "workspace" in value
                else 'missing field \'workspace\': give {"copy": DIR} or {"git": URL}'
            )
            continue
        if location == ["id"] and error["type"] == "string_pattern_mismatch":
            problems.append(
                "field 'id': use 1 to 128 letters, digits, '_', '.' or '-', starting with a "
                "letter or digit (it names the task's files)"
            )
        else:
            problems.append(describe_problem(error, known=lambda _: TaskSpec.model_fields))
    return "; ".join(dict.fromkeys(problems))


def _anchored(task: TaskSpec, base: Path) -> TaskSpec:
    """Relative directories (a copy, a repository on disk) made relative to the task file."""
    workspace = task.workspace
    if isinstance(workspace, CopyWorkspace):
        directory = (base / Path(workspace.directory).expanduser()).resolve()
        anchored_copy = CopyWorkspace.model_validate({"copy": str(directory)})
        return task.model_copy(update={"workspace": anchored_copy})
    local = base / Path(workspace.git).expanduser()
    if "://" not in workspace.git and local.is_dir():
        anchored = GitWorkspace(git=str(local.resolve()), rev=workspace.rev)
        return task.model_copy(update={"workspace": anchored})
    return task
