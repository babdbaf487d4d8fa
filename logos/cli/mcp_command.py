"""`logos mcp`: serve the `task` tool (`logos.mcp.task_server`) over stdio, each call a run of
the task plan the command was launched with (model, runner, limits, approval, `--mcp`)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial

from mcp.server.mcpserver.exceptions import ToolError
from rich.console import Console

from logos.agent.steps import StepMessage
from logos.approvals.approval import ApprovalDecision
from logos.cli.errors import CliError
from logos.cli.model import OpenModel
from logos.cli.task import NewTrajectory, TaskPlan, run_task
from logos.errors import RecordFileError, SettingsError
from logos.mcp.loopback_http import LoopbackHttp, guarded_app, serve_loopback
from logos.mcp.task_server import TaskCall, TaskLimits, TaskOutput, build_task_server
from logos.protocol.envelope import command_preview
from logos.records.events import RunEvents, RunSummary
from logos.result import JobEnd, Result
from logos.runners.live import LivePiece


class ProgressReporter(RunEvents):
    """A run's progress as one-line MCP progress messages; notices go to stderr (the client's
    log of the server)."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        super().__init__(lambda event: None)
        self._progress = progress
        self.summary: RunSummary | None = None
        self._stderr = Console(file=sys.stderr, highlight=False, markup=False, soft_wrap=True)

    def notice(self, text: str) -> None:
        self._stderr.print(f"logos mcp: {text}")

    @contextlib.contextmanager
    def prompting(self) -> Iterator[Console]:
        yield self._stderr

    def command_start(self, turn: int, index: int, command: str) -> None:
        self._progress(f"step {turn}: running {command_preview(command)}")

    def command_output(self, turn: int, index: int, piece: LivePiece) -> None:
        return None

    def command_result(self, turn: int, index: int, result: Result) -> None:
        how = "ok" if result.ok else (result.error or f"exit code {result.exit_code}")
        self._progress(f"step {turn}: {command_preview(result.command)}: {how}")

    def job_end(self, end: JobEnd, seen: bool) -> None:
        self._progress(f"job {end.id} ended")

    def step_end(self, turn: int, step: StepMessage) -> None:
        if step.role == "assistant":
            self._progress(f"step {turn}: the model replied")

    def approval(self, decision: ApprovalDecision) -> None:
        if decision.action in ("no", "never-run"):
            self._progress(f"refused: {command_preview(decision.command)}")

    def error(self, message: str) -> None:
        self._progress(f"error: {message}")

    def done(self, summary: RunSummary) -> None:
        self.summary = summary


async def serve_tasks(
    plan: TaskPlan, model: OpenModel, about: str, http: LoopbackHttp | None = None
) -> None:
    """Serve `logos mcp` on stdin/stdout until the client goes, or on `http` until stopped."""
    assert isinstance(plan.trajectory, NewTrajectory)
    directory = plan.trajectory.directory
    limits = plan.limits

    async def run_one(call: TaskCall) -> TaskOutput:
        reporter = ProgressReporter(call.progress)
        task_plan = replace(
            plan,
            prompt=call.task,
            trajectory=NewTrajectory(task=call.task, directory=directory),
            limits=replace(
                limits,
                max_steps=call.limits.max_steps,
                max_wall_s=call.limits.max_wall_s,
                max_cost_usd=call.limits.max_cost_usd,
            ),
            asker=call.asker,
            input_fd=-1,
            serving=True,
        )
        try:
            await run_task(task_plan, model, reporter)
        except (CliError, SettingsError, RecordFileError) as exc:  # its runner, records
            raise ToolError(exc.message) from None
        summary = reporter.summary or RunSummary(stop_reason="canceled")
        return TaskOutput(
            answer=summary.response,
            stop_reason=summary.stop_reason,
            error=summary.error,
            steps=summary.turns,
            input_tokens=summary.usage.input_tokens,
            output_tokens=summary.usage.output_tokens,
            cost_usd=summary.cost_usd,
            trajectory=summary.trajectory,
        )

    launch = TaskLimits(limits.max_steps, limits.max_wall_s, limits.max_cost_usd)
    server = build_task_server(launch, run_one, about)
    if http is None:
        await server.run_stdio_async()
    else:
        await serve_loopback(http, partial(guarded_app, server))
