"""Output for people: prose as the model writes it, commands as they run, a summary at the end.

Where things go:

* stdout carries the answer. On a terminal, all of the model's prose streams there token
  by token (the final answer is its last turn). When stdout is a file or a pipe
  (`logos "task" > answer.txt`), the prose streams to stderr instead and stdout receives
  exactly the final answer, once, as plain text.
* stderr carries everything else: a spinner line per running command (a live region at
  the bottom of the terminal), each finished command with its status, duration and the
  tail of its output (a command that went on as a job: "→ job 3, running", and its end
  when it comes), the reasoning (dimmed), retries, and a one-line summary.

Colours and the live region only appear on a terminal; `NO_COLOR` turns all styling off.
When prose and the live region share one screen, prose is printed above the region a line
at a time (a partial line cannot be drawn above it) and streams token by token again once
no command runs. While the user answers a question, everything is held, then flushed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, TextIO, TypeAlias

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from logos.agent.steps import StepMessage, StopReason
from logos.approvals.approval import ApprovalDecision
from logos.protocol.envelope import command_preview
from logos.records.events import RunSummary, StartEvent
from logos.result import JobEnd, Result
from logos.runners.live import LivePiece

_TAIL_LINES = 4
"""Lines of a finished command's output shown under it."""

_Kind: TypeAlias = Literal["prose", "reasoning"]
_Target: TypeAlias = Literal["out", "err"]
_STYLES: Mapping[_Kind, str] = {"prose": "", "reasoning": "dim italic"}

_STOP_DESCRIPTIONS: Mapping[StopReason, str] = {
    "final": "final answer",
    "max_steps": "stopped: step limit reached (--max-steps)",
    "max_cost": "stopped: cost limit reached (--max-cost)",
    "max_wall_time": "stopped: time limit reached (--max-time)",
    "max_tokens_budget": "stopped: token budget spent (--max-total-tokens)",
    "hallucination_limit": "stopped: the model kept writing fake tool calls",
    "canceled": "interrupted",
    "error": "failed",
}


def make_console(file: TextIO, environ: Mapping[str, str]) -> Console:
    """A console that styles only on a terminal, and never when NO_COLOR is set.

    WHY color_system=None for NO_COLOR: rich's own NO_COLOR support drops colours but
    keeps bold and dim escapes; NO_COLOR users want plain text.
    """
    plain = bool(environ.get("NO_COLOR"))
    console = Console(
        file=file,
        color_system=None if plain else "auto",
        highlight=False,
        markup=False,
        emoji=False,
    )
    # WHY: a file or a pipe has no width; lines are kept whole rather than cut at 80.
    console.soft_wrap = not console.is_terminal
    return console


def _same_target(first: TextIO, second: TextIO) -> bool:
    """Whether two streams end up in the same place (one terminal, or one file or pipe)."""
    try:
        one, two = os.fstat(first.fileno()), os.fstat(second.fileno())
    except (OSError, ValueError):
        return False
    return (one.st_dev, one.st_ino, one.st_rdev) == (two.st_dev, two.st_ino, two.st_rdev)


@dataclass
class _Running:
    command: str
    started: float = field(default_factory=time.monotonic)
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))
    last_line: str = ""
    """The last line it printed so far (from runners that tell: `logos.runners.live`)."""


class _RunningView:
    """The live region: one spinner row per running command, and the last line it printed."""

    def __init__(self, running: dict[tuple[int, int], _Running]) -> None:
        self._running = running

    def __rich__(self) -> RenderableType:
        # WHY a snapshot: the live region redraws from its own thread while commands
        # start and end; list() copies the dict without releasing the GIL.
        rows = list(self._running.values())
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, overflow="ellipsis")
        table.add_column(no_wrap=True, justify="right")
        now = time.monotonic()
        for row in rows:
            table.add_row(
                row.spinner,
                Text(command_preview(row.command)),
                Text(format_seconds(now - row.started), style="dim"),
            )
            if row.last_line:
                table.add_row("", Text(f"│ {row.last_line}", style="dim"), "")
        return table


class HumanRenderer:
    """A Reporter for people at a terminal (or reading a log of one).

    The unfinished line of prose (or reasoning) on the shared screen is tracked: before a
    decoration, a question or the live region is drawn, it is erased and set aside, and it
    is written again (then continued) once the screen is free. Off a terminal it cannot
    be erased, so the line is ended instead.
    """

    def __init__(self, stdout: TextIO, stderr: TextIO, environ: Mapping[str, str]) -> None:
        self.err = make_console(stderr, environ)
        self._stdout = stdout
        self._stream_answer = stdout.isatty()
        self._prose = stdout if self._stream_answer else stderr
        self._shared = _same_target(self._prose, stderr)
        self._terminal = self.err.is_terminal and not self.err.is_dumb_terminal
        self._live: Live | None = None
        self._running: dict[tuple[int, int], _Running] = {}
        self._view = _RunningView(self._running)
        self._line: dict[_Target, _Kind | None] = {"out": None, "err": None}
        """The kind of the unfinished line on each target, if there is one."""
        self._shown = ""
        """The unfinished line on stderr's screen, as it is displayed now."""
        self._aside = ""
        """The unfinished line on stderr's screen, erased while something else is drawn."""
        self._held: list[Callable[[], None]] | None = None
        self._after_decoration = False

    # Reporter ------------------------------------------------------------------------

    def start(self, info: StartEvent) -> None:
        """Nothing to show: the summary names the trajectory at the end."""

    def delta(self, text: str) -> None:
        self._output(lambda: self._text("prose", text))

    def reasoning_delta(self, text: str) -> None:
        self._output(lambda: self._text("reasoning", text))

    def command_start(self, turn: int, index: int, command: str) -> None:
        self._running[(turn, index)] = _Running(command)
        if self._terminal:
            self._output(self._start_live)
        else:
            self._decorate(Text(f"running: {command_preview(command)}", style="dim"))

    def command_result(self, turn: int, index: int, result: Result) -> None:
        self._running.pop((turn, index), None)
        self._decorate(result_view(result))
        if not self._running:
            self._output(self._stop_live)

    def command_output(self, turn: int, index: int, piece: LivePiece) -> None:
        running = self._running.get((turn, index))
        lines = [line for line in piece.text.splitlines() if line.strip()]
        if running is not None and lines:
            running.last_line = lines[-1]

    def job_end(self, end: JobEnd, seen: bool) -> None:
        self._decorate(job_end_view(end, seen))

    def step_end(self, turn: int, step: StepMessage) -> None:
        if step.role == "assistant":
            self._output(self._finish_lines)
        elif not step.results and step.content:
            # A corrective notice from the loop (fake tool call, empty reply…).
            first_line = step.content.strip().splitlines()[0]
            self._decorate(Text(f"note to the model: {first_line}", style="dim yellow"))

    def retry(self, reason: str, attempt: int) -> None:
        self._decorate(Text(f"retrying (attempt {attempt} failed): {reason}", style="yellow"))

    def approval(self, decision: ApprovalDecision) -> None:
        """Shown already: by the question itself, or in the command's result."""

    def notice(self, text: str) -> None:
        self._decorate(Text(text, style="yellow"))

    def error(self, message: str) -> None:
        self._decorate(Text(f"error: {message}", style="bold red"))

    def done(self, summary: RunSummary) -> None:
        self._stop_live()
        self._finish_lines()
        if summary.error:
            self.error(summary.error)
        if summary.stop_reason == "final" and not self._stream_answer and summary.response:
            self._stdout.write(summary.response.rstrip("\n") + "\n")
            self._stdout.flush()
        self.err.print(summary_line(summary), soft_wrap=True)

    @contextlib.contextmanager
    def prompting(self) -> Iterator[Console]:
        self._stop_live(restore=False)
        self._set_aside()
        self._held = []
        try:
            yield self.err
        finally:
            self._after_decoration = True
            held, self._held = self._held, None
            for show in held:
                show()
            if self._running:
                self._start_live()
            else:
                self._restore()

    # Text and decorations ---------------------------------------------------------------

    def _output(self, show: Callable[[], None]) -> None:
        if self._held is not None:
            self._held.append(show)
        else:
            show()

    def _decorate(self, renderable: RenderableType) -> None:
        def show() -> None:
            self._set_aside()
            self.err.print(renderable)
            self._after_decoration = True
            self._restore()

        self._output(show)

    def _target(self, kind: _Kind) -> _Target:
        return "err" if kind == "reasoning" or self._shared else "out"

    def _text(self, kind: _Kind, text: str) -> None:
        if not text:
            return
        target = self._target(kind)
        if self._line[target] not in (None, kind):
            self._finish_line(target)
        self._line[target] = kind
        if target == "out":
            self._write(kind, text)
            if text.endswith("\n"):
                self._line[target] = None
            return
        if self._after_decoration and not (self._shown or self._aside):
            # The newline that separated a block from the prose after it in the model's
            # text would leave a blank line under the command's panel, which replaced it.
            text = text.lstrip("\n")
            if not text:
                self._line[target] = None
                return
        self._after_decoration = False
        if self._live is not None:
            # Only whole lines can be printed above the live region.
            *lines, self._aside = (self._aside + text).split("\n")
            for line in lines:
                self.err.print(Text(line, style=_STYLES[kind]), soft_wrap=True)
        else:
            self._restore()
            self._write(kind, text)
            self._shown = (self._shown + text).rsplit("\n", 1)[-1]
        if not (self._shown or self._aside):
            self._line[target] = None

    def _write(self, kind: _Kind, text: str) -> None:
        if kind == "prose":
            self._prose.write(text)
            self._prose.flush()
        else:
            self.err.print(Text(text, style=_STYLES[kind]), end="", soft_wrap=True)

    def _set_aside(self) -> None:
        """Clear the screen's unfinished line before drawing something else."""
        kind = self._line["err"]
        if not self._shown or kind is None:
            return
        if self._terminal:
            self._erase(self._shown)
            self._aside, self._shown = self._shown, ""
        else:
            self._write(kind, "\n")
            self._shown = ""
            self._line["err"] = None

    def _restore(self) -> None:
        """Write the line set aside again, so that the text continues where it was."""
        kind = self._line["err"]
        if self._aside and kind is not None and self._live is None and self._held is None:
            self._write(kind, self._aside)
            self._shown, self._aside = self._aside, ""

    def _erase(self, line: str) -> None:
        rows = max(1, -(-cell_len(line) // max(1, self.err.width)))
        self.err.file.write("\r\x1b[2K" + "\x1b[1A\x1b[2K" * (rows - 1))
        self.err.file.flush()

    def _finish_line(self, target: _Target) -> None:
        kind = self._line[target]
        if kind is None:
            return
        self._line[target] = None
        if target == "out":
            self._write(kind, "\n")
        elif self._live is not None:
            if self._aside:
                self.err.print(Text(self._aside, style=_STYLES[kind]), soft_wrap=True)
        else:
            if self._aside:
                self._write(kind, self._aside)
            self._write(kind, "\n")
        self._shown = self._aside = ""

    def _finish_lines(self) -> None:
        self._finish_line("out")
        self._finish_line("err")

    def _start_live(self) -> None:
        if not self._terminal or self._live is not None or not self._running:
            return
        self._set_aside()
        self._after_decoration = True  # the command's panel will stand for its block
        self._live = Live(
            self._view,
            console=self.err,
            transient=True,
            refresh_per_second=10,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def _stop_live(self, *, restore: bool = True) -> None:
        if self._live is None:
            return
        self._live.stop()
        self._live = None
        if restore:
            self._restore()


def result_view(result: Result, tail_lines: int = _TAIL_LINES) -> RenderableType:
    """A finished command: ✓/✗, the command, how it ended, its duration, its output's tail;
    or a command that went on as a job: →, the command, its job's number."""
    if result.job is not None:
        header = Text.assemble(("→ ", "cyan"), (command_preview(result.command), "bold"))
        header.append(f"  job {result.job.id}, running", style="cyan")
        header.append(f"  {format_seconds(result.duration_s)}", style="dim")
    else:
        header = _ended_header(result, Text(command_preview(result.command), style="bold"))
    return _with_tail(header, result, tail_lines)


def job_end_view(end: JobEnd, seen: bool, tail_lines: int = _TAIL_LINES) -> RenderableType:
    """A job's end: ✓/✗, its number and command, how it ended, its whole duration, and the
    tail of the output it wrote since it went on; `seen` false: the run stopped it."""
    title = Text.assemble((f"job {end.id} ", "cyan"), (command_preview(end.result.command), "bold"))
    header = _ended_header(end.result, title)
    if not seen:
        header.append("  stopped as the run ended", style="yellow")
    return _with_tail(header, end.result, tail_lines)


def _ended_header(result: Result, title: Text) -> Text:
    ok = result.ok
    header = Text.assemble(("✓ " if ok else "✗ ", "green" if ok else "red"), title)
    status = human_status(result)
    if status:
        header.append(f"  {status}", style="red")
    if result.error is None:
        header.append(f"  {format_seconds(result.duration_s)}", style="dim")
    return header


def _with_tail(header: Text, result: Result, tail_lines: int) -> RenderableType:
    header.no_wrap = True
    header.overflow = "ellipsis"
    lines: list[RenderableType] = [header]
    output = (result.stdout.rstrip("\n") + "\n" + result.stderr.rstrip("\n")).strip("\n")
    if output and tail_lines > 0:
        all_lines = output.splitlines()
        shown = all_lines[-tail_lines:]
        if len(all_lines) > len(shown):
            lines.append(Text(f"  ⋮ {len(all_lines) - len(shown)} more lines", style="dim"))
        for line in shown:
            lines.append(Text(f"  │ {line}", style="dim", no_wrap=True, overflow="ellipsis"))
    return Group(*lines)


def human_status(result: Result) -> str:
    """How a command ended, briefly; "" for a plain success."""
    if result.error is not None:
        return result.error
    if result.timed_out:
        return f"timed out after {format_seconds(result.duration_s)}"
    if result.oom_killed:
        return "killed: out of memory"
    if result.signal is not None:
        return f"killed by {result.signal_name}"
    if result.exit_code:
        return f"exit {result.exit_code}"
    return ""


def summary_line(summary: RunSummary) -> Text:
    """The one line at the end: why it stopped, turns, tokens, cost, time, the trajectory."""
    style = {"final": "green", "canceled": "yellow", "error": "red"}.get(
        summary.stop_reason, "yellow"
    )
    usage = summary.usage
    parts = [
        f"{summary.turns} turn{'s' if summary.turns != 1 else ''}",
        f"{usage.total_input_tokens:,} in / {usage.output_tokens:,} out tokens",
    ]
    if summary.cost_usd is not None:
        parts.append(f"${summary.cost_usd:.4f}")
    parts.append(format_seconds(summary.wall_s))
    if summary.trajectory:
        parts.append(f"saved to {summary.trajectory}")
    line = Text(_STOP_DESCRIPTIONS[summary.stop_reason], style=f"bold {style}")
    line.append(" · " + " · ".join(parts), style="dim")
    return line


def format_seconds(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"
