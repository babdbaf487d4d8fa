"""One agent task from the command line: `logos "TASK"` and `logos resume`.

States what is the command's own about a run, which `logos.assembly` puts together: the
runner its flags name, the display, who is asked about commands (the terminal), the
trajectory's name, the limits, and the signals. Ctrl-C sets the loop's cancel event, so the
run stops the model, kills running commands and returns everything it recorded; a second
Ctrl-C cancels at once (runners still kill what they started).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio

from logos.agent.config import Config, ReplySettings, RunLimits
from logos.agent.steps import StopReason
from logos.approvals.approval import ApprovalMode, Approver
from logos.approvals.rules import ApprovalRules, approver_for
from logos.assembly import Approval, RunAssembly, RunParts
from logos.cli.confirm import ConfirmApprover
from logos.cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_STOPPED, CliError
from logos.cli.model import OpenModel
from logos.cli.paths import audit_log_path
from logos.cli.report import Reporter
from logos.cli.stopping import stop_signals
from logos.cli.streams import GuardedOutput
from logos.commands.family import CommandFamily
from logos.jsonl import utc_now
from logos.mcp.servers import McpServer
from logos.options import ExecOptions
from logos.providers.base import Message
from logos.records.trajectory import RunHeader, Trajectory, TrajectoryWriter
from logos.settings.runners import RunnerSpec, make_runner
from logos.version import logos_version


@dataclass(frozen=True)
class NewTrajectory:
    """Start a file: at `path`, or named after the task in `directory`."""

    task: str
    directory: str
    path: str | None = None


@dataclass(frozen=True)
class TaskPlan:
    """Everything a run needs, resolved and checked before the model is called."""

    prompt: str
    history: Sequence[Message]
    runner: RunnerSpec
    exec_options: ExecOptions
    system_prompt: str
    approval: ApprovalMode
    limits: RunLimits
    trajectory: NewTrajectory | Trajectory
    environ: Mapping[str, str] = field(default_factory=dict)
    input_fd: int = 0
    """Where the confirm prompt reads answers (a terminal)."""
    replies: ReplySettings = field(default_factory=ReplySettings)
    output: GuardedOutput | None = None
    """Where the reporter's stdout goes: when its reader leaves, the run stops."""
    rules: ApprovalRules | None = None
    """Approval rules over the mode: commands they let run, ask about or refuse."""
    loop_commands: Sequence[CommandFamily] = ()
    """Commands the loop answers itself (the memory notes' `remember`, `recall`, `forget`)."""
    mcp_servers: Sequence[McpServer] = ()
    """MCP servers whose tools the model may call (`--mcp`)."""
    asker: Approver | None = None
    """Who asks the person about a command; None: the terminal at `input_fd`, if any."""
    serving: bool = False
    """One task of a server that serves more (`logos mcp`): the model stays open after it,
    and the signals are the server's."""


def _exit_code_for(stop_reason: StopReason, signals: Sequence[int]) -> int:
    if stop_reason == "final":
        return EXIT_OK
    if stop_reason == "error":
        return EXIT_ERROR
    if stop_reason == "canceled":
        return 128 + signals[0] if signals else EXIT_INTERRUPTED
    return EXIT_STOPPED


async def run_task(plan: TaskPlan, model: OpenModel, reporter: Reporter) -> int:
    """Run the plan to its end and return the exit code; raises CliError (or SettingsError,
    for a runner that cannot open) before the run."""
    workdir = plan.exec_options.resolved_workdir() or os.getcwd()
    asker = plan.asker
    if asker is None and plan.input_fd >= 0:
        asker = ConfirmApprover(reporter, plan.input_fd, plan.environ)
    config = Config(
        provider=model.provider,
        model=model.model,
        system_prompt=plan.system_prompt,
        exec_options=plan.exec_options,
        loop_commands=plan.loop_commands,
        mcp_servers=plan.mcp_servers,
    )
    assembly = await RunAssembly.open(
        RunParts(
            config=plan.replies.apply(plan.limits.applied_to(config)),
            prompt=plan.prompt,
            history=plan.history,
            open_runner=partial(make_runner, plan.runner),
            open_trajectory=partial(_open_trajectory, plan, model, workdir),
            observer=reporter,
            approval=Approval(
                plan.approval,
                approver_for(plan.approval, plan.rules, asker),
                audit_log_path(plan.environ),
            ),
            runner_kind=plan.runner.kind,
            cwd=workdir,
            closes_provider=not plan.serving,
        )
    )
    cancel = anyio.Event()
    signals: list[int] = []
    if plan.output is not None:
        plan.output.on_lost = partial(_stop_for_lost_output, cancel, signals, reporter)
    async with _stopping(plan, signals, partial(_stop_gently, cancel, reporter)):
        await assembly.run(cancel)
    # WHY the attribute: a second Ctrl-C cancels the run, whose summary is recorded all the same
    summary = assembly.summary
    assert summary is not None
    return _exit_code_for(summary.stop_reason, signals)


def _stop_gently(cancel: anyio.Event, reporter: Reporter, signum: int) -> None:
    reporter.notice(
        "stopping: the model is stopped and running commands are killed "
        "(press Ctrl-C again to quit at once)"
    )
    cancel.set()


def _stop_for_lost_output(
    cancel: anyio.Event, received: list[int], reporter: Reporter, exc: OSError
) -> None:
    """stdout cannot be written any more: nobody sees the run, so it stops as on a signal."""
    if cancel.is_set():
        return
    if exc.errno == errno.EPIPE:
        received.append(signal.SIGPIPE)  # WHY: exit 141, as if the pipe had ended us
    reporter.notice(f"stopping: stdout can no longer be written ({exc.strerror})")
    cancel.set()


def _open_trajectory(plan: TaskPlan, model: OpenModel, workdir: str) -> TrajectoryWriter:
    target = plan.trajectory
    if isinstance(target, Trajectory):
        return TrajectoryWriter.append_to(target)
    header = RunHeader(
        logos_version=logos_version(),
        provider=model.provider.name,
        model=model.model,
        base_url=model.base_url,
        gguf=model.gguf,
        runner=plan.runner.kind,
        sandbox=plan.runner.sandbox,
        cwd=workdir,
        started_at=utc_now(),
        system_prompt=plan.system_prompt,
    )
    if target.path is None:
        return TrajectoryWriter.create_in(Path(target.directory), target.task, header)
    path = Path(target.path).expanduser()
    try:
        return TrajectoryWriter.create(path, header)
    except FileExistsError:
        raise CliError(
            f"{path} already exists: choose another --trajectory, or continue that run "
            f"with `logos resume {path}`"
        ) from None


def _stopping(
    plan: TaskPlan, received: list[int], first: Callable[[int], None]
) -> AbstractAsyncContextManager[None]:
    """Stop signals stop the run, unless a server's own handling of them is in charge."""
    return contextlib.nullcontext() if plan.serving else stop_signals(received, first)
