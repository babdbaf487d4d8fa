"""Trajectories: every run written down as JSON lines while it happens, to read or resume.

One record per line, each appended with a single write and no buffering, so a crash or
Ctrl-C loses nothing but, at worst, a truncated last line (which reading skips with a
warning and resuming cuts off). The format, version 1:

    {"type": "run", "version": 1, "provider", "model", "base_url", "gguf", "runner",
     "cwd", "started_at", "system_prompt", "logos_version"}        first line, once
    {"type": "prompt", "content", "time"}                          the task / a follow-up
    {"type": "step", ...a logos.StepMessage: role, content, reasoning, results, usage…}
    {"type": "approval", "action", "command", "edited_command", "reason", "time"}
    {"type": "job_start", "turn", "index", "id", "command", "stdout_file", "stderr_file"}
    {"type": "job_end", "id", "result", "seen"}                    a job's end
    {"type": "done", "stop_reason", "error", "usage", "cost_usd", "steps", "wall_s",
     "model", "time"}                                              a `RunSummary`

`logos resume` appends a new prompt and its steps to the same file; the conversation is the
prompts and steps in file order (the job records are for reading: each end the model saw is
in a step too). A writer holds an exclusive `flock` on the file while it
writes, so a run that is still going cannot be resumed at the same time.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from logos.agent.steps import StepMessage, steps_to_messages
from logos.approvals.approval import ApprovalDecision
from logos.errors import RecordFileError
from logos.jsonl import JsonLinesFile, open_private_append, utc_now, write_line
from logos.providers.base import Message
from logos.providers.registry import ProviderName
from logos.records.events import (
    ApprovalEvent,
    JobEndEvent,
    JobStartEvent,
    RunSummary,
    count_turns as count_turns,  # WHY: batch counts turns here
)

TRAJECTORY_VERSION = 1
_SLUG_WORDS = re.compile(r"[a-z0-9]+")
_SLUG_MAX = 40


class _Record(BaseModel):
    # WHY ignore unknown fields: a file written by a newer logos of the same version stays
    # readable; a breaking change bumps `version` instead.
    model_config = ConfigDict(extra="ignore", frozen=True)


class RunHeader(_Record):
    type: Literal["run"] = "run"
    version: int = TRAJECTORY_VERSION
    logos_version: str
    provider: ProviderName
    model: str
    base_url: str | None
    """None for a `--gguf` run, whose server lived only as long as the run."""
    gguf: str | None = None
    runner: Literal["local", "sandbox"]
    sandbox: str | None = None
    """The sandbox kind commands ran in (None for local bash, and in files written before
    there was more than one kind: sandboxd)."""
    cwd: str
    started_at: str
    system_prompt: str

    def sandbox_kind(self) -> str | bool:
        """The run's sandbox kind for a resumed run: its name, True for the default kind
        (an older file's sandbox), False for local bash."""
        if self.runner == "local":
            return False
        return self.sandbox or True


class PromptRecord(_Record):
    type: Literal["prompt"] = "prompt"
    content: str
    time: str


_OTHER_RECORDS: TypeAdapter[Any] = TypeAdapter(
    Annotated[
        PromptRecord | ApprovalEvent | JobStartEvent | JobEndEvent | RunSummary,
        Field(discriminator="type"),
    ]
)
_STEP: TypeAdapter[StepMessage] = TypeAdapter(StepMessage)

Entry: TypeAlias = (
    PromptRecord | StepMessage | ApprovalEvent | JobStartEvent | JobEndEvent | RunSummary
)


def step_to_json(step: StepMessage) -> dict[str, Any]:
    """A step as plain JSON data (the `--json` events use the same shape)."""
    data: dict[str, Any] = _STEP.dump_python(step, mode="json")
    return data


@dataclass(frozen=True)
class Trajectory:
    """A trajectory file, read and validated."""

    path: Path
    header: RunHeader
    entries: tuple[Entry, ...]
    warnings: tuple[str, ...] = ()
    valid_bytes: int = 0
    """Where the last valid line ends (a damaged tail starts here)."""
    ends_with_newline: bool = True
    size: int = 0
    """The file's size when it was read."""

    @property
    def steps(self) -> list[StepMessage]:
        return [entry for entry in self.entries if isinstance(entry, StepMessage)]

    def history(self) -> list[Message]:
        """The conversation to resume: prompts and steps in file order."""
        messages: list[Message] = []
        for entry in self.entries:
            if isinstance(entry, PromptRecord):
                messages.append(Message(role="user", content=entry.content))
            elif isinstance(entry, StepMessage):
                messages.extend(steps_to_messages([entry]))
        return messages


def load_trajectory(path: Path) -> Trajectory:
    """Read `path`; a damaged last line is skipped with a warning, any other is an error."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecordFileError(
            f"no trajectory at {path}: give the path of a run's .jsonl file"
        ) from None
    except OSError as exc:
        raise RecordFileError(
            f"cannot read {path}: {exc.strerror}: give the path of a run's .jsonl file"
        ) from None
    lines = _lines_with_ends(data)
    if not lines:
        raise RecordFileError(f"{path} is empty: it is not a logos trajectory")
    header: RunHeader | None = None
    entries: list[Entry] = []
    warnings: list[str] = []
    valid_bytes = 0
    for number, (text, end) in enumerate(lines, start=1):
        is_last = number == len(lines)
        try:
            record = _parse_line(text, first=number == 1)
        except ValueError as exc:
            if number == 1:
                raise RecordFileError(f"{path} is not a logos trajectory: {exc}") from None
            if not is_last:
                raise RecordFileError(
                    f"{path}, line {number}: {exc}: the file is damaged; fix or delete that "
                    "line and try again"
                ) from None
            warnings.append(
                f"{path}: skipped the last line ({len(text)} bytes): it is incomplete ({exc}), "
                "probably cut off by a crash"
            )
            break
        if isinstance(record, RunHeader):
            if record.version > TRAJECTORY_VERSION:
                raise RecordFileError(
                    f"{path} was written by a newer logos (trajectory format version "
                    f"{record.version}; this one reads up to {TRAJECTORY_VERSION}): upgrade logos"
                )
            header = record
        else:
            entries.append(record)
        valid_bytes = end
    assert header is not None  # the first line parsed as a header, or we raised
    return Trajectory(
        path=path,
        header=header,
        entries=tuple(entries),
        warnings=tuple(warnings),
        valid_bytes=valid_bytes,
        ends_with_newline=data[valid_bytes - 1 : valid_bytes] == b"\n",
        size=len(data),
    )


def _lines_with_ends(data: bytes) -> list[tuple[bytes, int]]:
    """Non-blank lines with the offset just past each (past its newline when it has one)."""
    lines = []
    start = 0
    while start < len(data):
        newline = data.find(b"\n", start)
        end = len(data) if newline < 0 else newline + 1
        text = data[start:end].rstrip(b"\r\n")
        if text.strip():
            lines.append((text, end))
        start = end
    return lines


def _parse_line(text: bytes, *, first: bool) -> RunHeader | Entry:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    kind = raw.get("type")
    try:
        if first:
            if kind != "run":
                raise ValueError('the first line is not a {"type": "run"} header')
            return RunHeader.model_validate(raw)
        if kind == "step":
            return _STEP.validate_python({k: v for k, v in raw.items() if k != "type"})
        if kind == "run":
            raise ValueError("a second run header")
        entry: Entry = _OTHER_RECORDS.validate_python(raw)
        return entry
    except ValidationError as exc:
        problem = exc.errors()[0]
        location = problem["loc"]
        if location[:1] == (kind,):  # the discriminated union names the record type first
            location = location[1:]
        where = ".".join(str(part) for part in location) or "record"
        raise ValueError(
            f"invalid {kind or 'untyped'} record ({where}: {problem['msg']})"
        ) from None


class TrajectoryWriter(JsonLinesFile):
    """Appends records to a trajectory file, one unbuffered write per line."""

    @classmethod
    def create(cls, path: Path, header: RunHeader) -> Self:
        """A new file at `path`; raises FileExistsError rather than overwrite a file."""
        fd = open_private_append(path, exclusive=True)
        return cls._started(path, fd, header)

    @classmethod
    def create_in(cls, directory: Path, task: str, header: RunHeader) -> Self:
        """A new file `<UTC timestamp>-<slug of the task>.jsonl` in `directory`."""
        stem = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}-{task_slug(task)}"
        for attempt in range(1, 1000):
            path = directory / (f"{stem}.jsonl" if attempt == 1 else f"{stem}-{attempt}.jsonl")
            try:
                fd = open_private_append(path, exclusive=True)
            except FileExistsError:
                continue
            return cls._started(path, fd, header)
        raise RecordFileError(f"cannot find a free file name for {stem}.jsonl in {directory}")

    @classmethod
    def append_to(cls, trajectory: Trajectory) -> Self:
        """Continue `trajectory`'s file, first cutting off a damaged last line.

        Refused while another run writes to the file, and when the file changed since it
        was read (the history would be stale, and cutting it would lose records).
        """
        path = trajectory.path
        fd = open_private_append(path)
        try:
            _lock(fd, path)
            size = os.fstat(fd).st_size
            if size != trajectory.size:
                raise RecordFileError(
                    f"{path} changed while logos was reading it (a run wrote to it): "
                    "run the command again"
                )
            if size > trajectory.valid_bytes:
                os.ftruncate(fd, trajectory.valid_bytes)
            if not trajectory.ends_with_newline:
                write_line(fd, "")
        except OSError as exc:
            os.close(fd)
            raise RecordFileError(f"cannot append to {path}: {exc.strerror}") from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    @classmethod
    def _started(cls, path: Path, fd: int, header: RunHeader) -> Self:
        try:
            _lock(fd, path)
        except BaseException:
            os.close(fd)
            raise
        writer = cls(path, fd)
        writer._write(header.model_dump(mode="json"))
        return writer

    def prompt(self, content: str) -> None:
        self._write(PromptRecord(content=content, time=utc_now()).model_dump(mode="json"))

    def step(self, step: StepMessage) -> None:
        self._write({"type": "step", **step_to_json(step)})

    def approval(self, decision: ApprovalDecision) -> None:
        self._write(ApprovalEvent(**vars(decision)).model_dump(mode="json"))

    def job(self, event: JobStartEvent | JobEndEvent) -> None:
        self._write(event.model_dump(mode="json"))

    def done(self, summary: RunSummary, *, model: str | None) -> None:
        """The run's end, with the model it used (a resumed run may switch models)."""
        record = summary.model_dump(mode="json", by_alias=True, exclude={"response", "trajectory"})
        self._write({**record, "model": model, "time": utc_now()})

    def _write(self, data: dict[str, Any]) -> None:
        self.write_line(json.dumps(data, ensure_ascii=False))


def _lock(fd: int, path: Path) -> None:
    """Hold the file for this writer until the descriptor is closed.

    WHY best effort: a file system without locks (some network mounts) must not stop a
    run; it only loses the guard against resuming a run that is still going.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RecordFileError(
            f"{path} is in use: its run is still going. Wait for it to end (or stop it with "
            "Ctrl-C), then resume it"
        ) from None
    except OSError:
        return


def task_slug(task: str) -> str:
    """A short file-name-safe summary of the task: its first words, lower-cased."""
    slug = ""
    for word in _SLUG_WORDS.findall(task.lower()):
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > _SLUG_MAX:
            break
        slug = candidate
    return slug or "task"
