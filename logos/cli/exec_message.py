"""`logos exec`: run the `<cmd>` blocks of one assistant message, print the `<result>` envelope.

Library mode for other harnesses: they keep the conversation and call the model themselves;
logos parses the blocks, runs them concurrently (local bash or the sandbox, under the same
policy and approval audit as a run) and formats what the model reads next. Exit status: 0
when every block succeeded, 1 when any failed (non-zero exit, timeout, signal, refused or
not run, or the message ends in an unclosed block), 2 for a usage or setup error, 128 + the
signal's number when Ctrl-C, SIGTERM or SIGHUP stopped it (the commands are killed). A
message without blocks prints nothing (exit 0): for the model, that was its final answer.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from logos.agent.execute import execute_blocks
from logos.approvals.approval import ApprovalMode, ApprovalRunner
from logos.approvals.audit import AuditLog
from logos.approvals.rules import ApprovalRules, approver_for
from logos.cli.errors import CliError
from logos.cli.paths import audit_log_path
from logos.cli.stopping import stop_signals
from logos.closing import close_bounded
from logos.options import ExecOptions
from logos.protocol.parse import CmdStreamParser, CommandBlock, UnclosedBlock
from logos.result import Result
from logos.settings.runners import RunnerSpec, make_runner


@dataclass(frozen=True)
class MessageBlocks:
    commands: list[str]
    unclosed: str | None
    """The text of a block the message ends in without closing it (never run)."""


def read_blocks(message: str) -> MessageBlocks:
    """The message's complete blocks, and the one it ends in without closing, if any."""
    parser = CmdStreamParser()
    events = [*parser.feed(message), *parser.close()]
    commands = [event.command for event in events if isinstance(event, CommandBlock)]
    unclosed = next((e.partial_text for e in events if isinstance(e, UnclosedBlock)), None)
    return MessageBlocks(commands, unclosed)


@dataclass(frozen=True)
class ExecPlan:
    commands: Sequence[str]
    runner: RunnerSpec
    exec_options: ExecOptions
    approval: ApprovalMode
    environ: Mapping[str, str]
    rules: ApprovalRules | None = None
    """Approval rules over the mode; nobody can be asked, so "confirm" refuses."""


async def execute_message(plan: ExecPlan) -> list[Result]:
    """Run the commands (audited like a run's), then close the runner whatever happens.

    A stop signal kills the commands and raises CliError with exit status 128 + its number.
    """
    runner = make_runner(plan.runner)
    workdir = plan.exec_options.resolved_workdir() or os.getcwd()
    received: list[int] = []
    results: list[Result] = []
    try:
        with AuditLog(
            audit_log_path(plan.environ),
            mode=plan.approval,
            runner=plan.runner.kind,
            cwd=workdir,
            trajectory=None,
        ) as audit:
            gated = ApprovalRunner(
                runner, approver_for(plan.approval, plan.rules, None), audit.record
            )
            async with stop_signals(received):
                results = await execute_blocks(plan.commands, gated, plan.exec_options)
    finally:
        await close_bounded(runner.aclose)
    if received:
        name = signal.Signals(received[0]).name
        raise CliError(f"stopped by {name}: the commands were killed", 128 + received[0])
    return results
