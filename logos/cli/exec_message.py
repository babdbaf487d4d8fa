"""`logos exec`: run the `<cmd>` blocks of one assistant message, print the `<result>` envelope.

Library mode for other harnesses: they keep the conversation and call the model themselves;
logos parses the blocks, runs them concurrently (local bash or the sandbox, under the same
policy and approval audit as a run) and formats what the model reads next. Exit status: 0
when every block succeeded, 1 when any failed (non-zero exit, timeout, signal, refused or
not run), 2 for a usage or setup error. A message without blocks prints nothing (exit 0):
for the model, that was its final answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio

from logos.cli.approval import ApprovalMode, ApprovalRunner, AutoApprover, NeverRunApprover
from logos.cli.audit import AuditLog
from logos.cli.paths import audit_log_path
from logos.cli.runners import RunnerSpec, make_runner
from logos.execute import execute_blocks
from logos.options import ExecOptions
from logos.result import Result

CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ExecPlan:
    commands: Sequence[str]
    runner: RunnerSpec
    exec_options: ExecOptions
    approval: ApprovalMode
    environ: Mapping[str, str]


async def execute_message(plan: ExecPlan) -> list[Result]:
    """Run the commands (audited like a run's), then close the runner whatever happens."""
    runner = make_runner(plan.runner)
    workdir = plan.exec_options.resolved_workdir() or os.getcwd()
    approver = NeverRunApprover() if plan.approval == "never-run" else AutoApprover()
    try:
        with AuditLog(
            audit_log_path(plan.environ),
            mode=plan.approval,
            runner=plan.runner.kind,
            cwd=workdir,
            trajectory=None,
        ) as audit:
            gated = ApprovalRunner(runner, approver, audit.record)
            return await execute_blocks(plan.commands, gated, plan.exec_options)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
            await runner.aclose()
