"""`logos show`: a trajectory rendered for reading, as the run looked on the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from logos.agent.steps import StepMessage
from logos.cli.render import job_end_view, result_view, summary_line
from logos.protocol.parse import strip_cmd_blocks
from logos.records.events import ApprovalEvent, JobEndEvent, RunSummary, count_turns
from logos.records.trajectory import PromptRecord, Trajectory
from logos.result import JobEnd

_REASONING_LINES = 6
_OUTPUT_TAIL_LINES = 6


def show_trajectory(trajectory: Trajectory, console: Console) -> None:
    header = trajectory.header
    where = header.gguf or header.base_url or ""
    console.print(
        Text.assemble(
            ("run ", "bold"),
            (header.started_at, "bold"),
            (f"  {header.provider} {header.model}", "cyan"),
            (f" at {where}" if where else "", "dim"),
            (f"  {header.runner} in {header.cwd}", "dim"),
        )
    )
    turns_since_prompt: list[StepMessage] = []
    ended = True
    for entry in trajectory.entries:
        if isinstance(entry, PromptRecord):
            turns_since_prompt = []
            ended = False
            console.print()
            console.print(Text("> " + entry.content.strip(), style="bold"))
        elif isinstance(entry, StepMessage):
            turns_since_prompt.append(entry)
            _show_step(entry, console)
        elif isinstance(entry, ApprovalEvent):
            _show_approval(entry, console)
        elif isinstance(entry, JobEndEvent):
            end = JobEnd(entry.id, entry.result)
            console.print(job_end_view(end, entry.seen, tail_lines=_OUTPUT_TAIL_LINES))
        elif isinstance(entry, RunSummary):
            ended = True
            if entry.error:
                console.print(Text(f"error: {entry.error}", style="bold red"))
            turns = entry.turns or count_turns(turns_since_prompt)
            console.print(summary_line(entry.model_copy(update={"turns": turns})))
    if not ended:
        console.print(
            Text("(no end recorded: the run was cut off, or is still going)", style="yellow")
        )


def _show_step(step: StepMessage, console: Console) -> None:
    if step.role == "assistant":
        if step.reasoning:
            lines = step.reasoning.strip().splitlines()
            shown = "\n".join(lines[:_REASONING_LINES])
            hidden = len(lines) - _REASONING_LINES
            more = f"\n⋮ {hidden} more lines" if hidden > 0 else ""
            console.print(Text(shown + more, style="dim italic"))
        prose = strip_cmd_blocks(step.content)
        if prose:
            console.print(Text(prose))
        return
    for result in step.results:
        console.print(result_view(result, tail_lines=_OUTPUT_TAIL_LINES))
    if not step.results and step.content.strip():
        first_line = step.content.strip().splitlines()[0]
        console.print(Text(f"note to the model: {first_line}", style="dim yellow"))


def _show_approval(record: ApprovalEvent, console: Console) -> None:
    if record.action in ("auto", "yes", "never-run"):
        return  # the command's result says it all
    if record.action == "no":
        text = f"declined by the user: {record.reason or '(no reason given)'}"
    elif record.action == "edit":
        text = f"edited by the user; ran instead: {record.edited_command}"
    else:
        text = "approved, and every later command of this run"
    console.print(Text(text, style="yellow"))
