"""What a batch shows while it runs: a live progress line on a terminal, plain lines in a log,
or one JSON event per line with `--json`.

Progress counts this invocation's tasks: done, running, failed (failed or error), the rate
of tasks done per second, the time elapsed and the time left at that rate.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from logos.batch.results import TaskResult
from logos.batch.summary import BatchSummary, describe
from logos.batch.tasks import LineProblem

_REFRESH_PER_S = 4


@dataclass(frozen=True)
class BatchStart:
    tasks: int
    """Valid tasks in the task file."""
    to_run: int
    skipped: int
    """Done in an earlier run of the same output directory."""
    where: str
    """Where tasks run, in words (e.g. "8 workers on this machine, local bash")."""


class Display(Protocol):
    def start(self, start: BatchStart, problems: tuple[LineProblem, ...]) -> None: ...

    def task_started(self, task_id: str) -> None: ...

    def task_ended(self, result: TaskResult) -> None: ...

    def notice(self, message: str) -> None: ...

    def finish(self, summary: BatchSummary) -> None: ...


class _Progress:
    """This invocation's counts, and the rate and time left they imply."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.to_run = 0
        self.running: set[str] = set()
        self.done = 0
        self.failed = 0

    def ended(self, result: TaskResult) -> None:
        self.running.discard(result.id)
        self.done += 1
        self.failed += result.status in ("failed", "error")

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = self.to_run - self.done
        eta = _clock(left / rate) if rate > 0 else "?"
        return (
            f"done {self.done}/{self.to_run} · running {len(self.running)} · failed "
            f"{self.failed} · {rate:.2f} tasks/s · elapsed {_clock(elapsed)} · left {eta}"
        )


class TerminalDisplay:
    """A live progress line on stderr, with a line per task as it ends."""

    def __init__(self, err: TextIO) -> None:
        self._console = Console(file=err, stderr=True)
        self._progress = _Progress()
        self._live = Live(
            Text(""),
            console=self._console,
            refresh_per_second=_REFRESH_PER_S,
            transient=True,
            get_renderable=lambda: Text(self._progress.line(), style="bold"),
        )

    def start(self, start: BatchStart, problems: tuple[LineProblem, ...]) -> None:
        for problem in problems:
            self._console.print(f"[yellow]skipped[/] task file {problem}", highlight=False)
        self._console.print(_start_line(start), highlight=False)
        self._progress.to_run = start.to_run
        self._live.start()

    def task_started(self, task_id: str) -> None:
        self._progress.running.add(task_id)

    def task_ended(self, result: TaskResult) -> None:
        self._progress.ended(result)
        style = {"passed": "green", "canceled": "yellow"}.get(result.status, "red")
        self._console.print(Text(_result_line(result), style=style))

    def notice(self, message: str) -> None:
        self._console.print(f"logos: {message}", highlight=False, markup=False)

    def finish(self, summary: BatchSummary) -> None:
        self._live.stop()
        self._console.print(self._progress.line(), highlight=False)
        for line in describe(summary):
            self._console.print(line, highlight=False)


class LineDisplay:
    """Plain lines on stderr, for logs: one per task as it ends, and the summary."""

    def __init__(self, err: TextIO) -> None:
        self._err = err
        self._progress = _Progress()

    def start(self, start: BatchStart, problems: tuple[LineProblem, ...]) -> None:
        for problem in problems:
            self._print(f"skipped task file {problem}")
        self._progress.to_run = start.to_run
        self._print(_start_line(start))

    def task_started(self, task_id: str) -> None:
        self._progress.running.add(task_id)

    def task_ended(self, result: TaskResult) -> None:
        self._progress.ended(result)
        self._print(f"{_result_line(result)}  [{self._progress.line()}]")

    def notice(self, message: str) -> None:
        self._print(f"logos: {message}")

    def finish(self, summary: BatchSummary) -> None:
        for line in describe(summary):
            self._print(line)

    def _print(self, line: str) -> None:
        print(line, file=self._err, flush=True)


class JsonDisplay:
    """One JSON object per line on stdout: `batch_start`, `task_file_problem`, `task_end`
    (a results line) and `batch_done` (the summary); notices go to stderr."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out = out
        self._err = err

    def start(self, start: BatchStart, problems: tuple[LineProblem, ...]) -> None:
        for problem in problems:
            self._event("task_file_problem", {"line": problem.line, "message": problem.message})
        self._event("batch_start", vars(start))

    def task_started(self, task_id: str) -> None:
        return None

    def task_ended(self, result: TaskResult) -> None:
        self._event("task_end", result.model_dump(mode="json"))

    def notice(self, message: str) -> None:
        print(f"logos: {message}", file=self._err, flush=True)

    def finish(self, summary: BatchSummary) -> None:
        self._event("batch_done", summary.model_dump(mode="json"))

    def _event(self, kind: str, fields: dict[str, Any]) -> None:
        print(json.dumps({"type": kind, **fields}, ensure_ascii=False), file=self._out, flush=True)


def _start_line(start: BatchStart) -> str:
    skipped = f", {start.skipped} done earlier" if start.skipped else ""
    return f"{start.to_run} of {start.tasks} tasks to run{skipped}, on {start.where}"


def _result_line(result: TaskResult) -> str:
    mark = {"passed": "✓", "canceled": "-"}.get(result.status, "✗")
    details: list[str] = [result.status]
    if result.stop_reason is not None:
        details.append(f"{result.steps} turns, {result.stop_reason}")
    if result.check_exit_code not in (None, 0):
        details.append(f"check exit {result.check_exit_code}")
    details.append(f"{result.wall_s:.2f} s")
    line = f"{mark} {result.id} ({', '.join(details)})"
    if result.error:
        line += f": {result.error.splitlines()[0][:200]}"
    return line


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
