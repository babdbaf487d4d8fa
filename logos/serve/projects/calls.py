"""One agent call: the agent's loop run on its own session, with its own runner, its
allowance of the budget, and its events published into the project's log under the id of
the message it writes. What it did is kept however it ends (finished, stopped, failed)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
from pydantic import BaseModel

from logos.agent.config import Config
from logos.agent.steps import StepMessage
from logos.approvals.approval import ApprovalDecision, Approver
from logos.assembly import Approval, RunAssembly, RunParts
from logos.ceiling import PathCeiling
from logos.options import AllowedPath, ExecOptions
from logos.options.declarations import MAX_STEPS, MAX_TOKENS, TEMPERATURE
from logos.options.option import Place, requested
from logos.protocol.envelope import command_preview
from logos.providers.base import Usage
from logos.records.events import (
    CommandOutputEvent,
    CommandResultEvent,
    CommandStartEvent,
    JobEndEvent,
    RunSummary,
    StartEvent,
)
from logos.records.trajectory import Trajectory, load_trajectory
from logos.result import JobEnd, Result
from logos.runners.live import LivePiece
from logos.serve.projects.budget import Allowance
from logos.serve.projects.events import ApprovalDecided, CommandActivity, MessageDelta
from logos.serve.projects.wire import AgentRecord
from logos.serve.setup import RunnerChoice, ServerSetup


@dataclass(frozen=True)
class CallPlan:
    project_id: str
    agent: AgentRecord
    ceiling: PathCeiling
    """The roots the agent's sandbox is held to (permissions.agent_ceiling)."""
    message_id: str
    prompt: str
    allowance: Allowance
    session_path: Path
    cancel: anyio.Event


@dataclass(frozen=True)
class CallOutcome:
    summary: RunSummary
    prose: str
    """Everything it wrote but its commands, across its model turns."""
    commands: tuple[str, ...]
    """One line per command: the command and how it ended."""


def runner_choice(agent: AgentRecord) -> RunnerChoice:
    return RunnerChoice(
        sandbox=agent.runner_kind == "sandbox",
        network=agent.network,
        allowed_hosts=tuple(agent.allowed_hosts),
    )


def exec_options(setup: ServerSetup, agent: AgentRecord, ceiling: PathCeiling) -> ExecOptions:
    paths = tuple(AllowedPath(p.path, p.read_only) for p in agent.allowed_paths)
    if agent.runner_kind == "local":
        paths = paths[:1]  # WHY: a local command reaches the machine; the first is its cwd
    return dataclasses.replace(
        setup.template.exec_options,
        allowed_paths=paths,
        allowed_hosts=tuple(agent.allowed_hosts),
        path_ceiling=ceiling,
    )


def _summarise(result: Result) -> str:
    if result.job is not None:
        ended = "went on as a job"
    elif result.error is not None:
        ended = f"failed to run: {result.error[:120]}"
    elif result.timed_out:
        ended = "timed out"
    elif result.exit_code is None:
        ended = f"killed by signal {result.signal}"
    else:
        ended = f"exit {result.exit_code}"
    return f"`{command_preview(result.command)}` → {ended}"


@dataclass
class _Observer:
    """Publishes the agent's run events into the project's log under its message id."""

    publish: Callable[[BaseModel], object]
    agent: str
    message: str
    on_usage: Callable[[Usage], object]
    """Each model turn's usage as it ends: the spend is shown live, not only at the end."""
    pending: dict[str, str] = field(default_factory=dict)
    """Command → the id of its approval question, while it waits."""
    prose: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def _command(self, event: BaseModel) -> None:
        self.publish(
            CommandActivity(
                message=self.message, agent=self.agent, event=event.model_dump(mode="json")
            )
        )

    def start(self, info: StartEvent) -> None:
        pass

    def delta(self, text: str) -> None:
        self.prose.append(text)
        self.publish(MessageDelta(message=self.message, text=text))

    def reasoning_delta(self, text: str) -> None:
        pass

    def command_start(self, turn: int, index: int, command: str) -> None:
        self._command(CommandStartEvent(turn=turn, index=index, command=command))

    def command_output(self, turn: int, index: int, piece: LivePiece) -> None:
        self._command(CommandOutputEvent.of(turn, index, piece))

    def command_result(self, turn: int, index: int, result: Result) -> None:
        self.commands.append(_summarise(result))
        self._command(CommandResultEvent(turn=turn, index=index, result=result))

    def job_end(self, end: JobEnd, seen: bool) -> None:
        self._command(JobEndEvent.of(end, seen))

    def step_end(self, turn: int, step: StepMessage) -> None:
        if step.role != "assistant":
            return
        if self.prose and not self.prose[-1].endswith("\n"):
            self.prose.append("\n")
        if step.usage is not None:
            self.on_usage(step.usage)

    def retry(self, reason: str, attempt: int) -> None:
        pass

    def approval(self, decision: ApprovalDecision) -> None:
        self.publish(
            ApprovalDecided(
                id=self.pending.pop(decision.command, None),
                agent=self.agent,
                message=self.message,
                action=decision.action,
                command=decision.command,
                reason=decision.reason,
            )
        )

    def error(self, message: str) -> None:
        pass

    def done(self, summary: RunSummary) -> None:
        pass


async def call_agent(
    setup: ServerSetup,
    plan: CallPlan,
    approver: Callable[[_Observer], Approver],
    publish: Callable[[BaseModel], object],
    on_usage: Callable[[Usage], object],
) -> CallOutcome:
    """Run the agent's loop once; RecordFileError when its session cannot be written,
    ValueError when its runner cannot open."""
    agent = plan.agent
    choice = runner_choice(agent)
    options = exec_options(setup, agent, plan.ceiling)
    workdir = options.resolved_workdir() or setup.workdir
    path = plan.session_path
    continued: Trajectory | None = load_trajectory(path) if path.exists() else None
    system_prompt = setup.runners.system_prompt(choice, options, continued)
    observer = _Observer(publish, agent.name, plan.message_id, on_usage)
    assembly = await RunAssembly.open(
        RunParts(
            config=_config(setup, agent, plan.allowance, system_prompt, options),
            prompt=plan.prompt,
            history=continued.history() if continued is not None else [],
            open_runner=partial(setup.runners.open, choice),
            open_trajectory=partial(
                setup.session_writer, path, choice, workdir, system_prompt, continued
            ),
            observer=observer,
            approval=Approval(agent.approval, approver(observer), setup.audit_path),
            runner_kind=choice.kind,
            cwd=workdir,
        )
    )
    summary = await assembly.run(plan.cancel)
    return CallOutcome(summary, "".join(observer.prose).strip(), tuple(observer.commands))


def _config(
    setup: ServerSetup,
    agent: AgentRecord,
    allowance: Allowance,
    system_prompt: str,
    options: ExecOptions,
) -> Config:
    template = setup.template
    settings = agent.model
    # WHY no check-back: in a team a reply without a command is normal (a handoff, a question
    # to the person), and the answer given after the check-back could drop its directive.
    changes: dict[str, object] = {
        "system_prompt": system_prompt,
        "exec_options": options,
        "replies": dataclasses.replace(template.replies, check_back=False),
    }
    for option, name in (
        (MAX_STEPS, "max_steps"),
        (MAX_TOKENS, "max_tokens"),
        (TEMPERATURE, "temperature"),
    ):
        asked = requested(settings, option, Place.AGENT_MODEL)
        if asked is not None:
            changes[name] = asked
    for name, limit in (
        ("max_total_tokens", allowance.tokens),
        ("max_cost_usd", allowance.cost_usd),
        ("max_wall_s", allowance.wall_s),
    ):
        ceiling = getattr(template, name)
        if limit is not None:
            changes[name] = limit if ceiling is None else min(limit, ceiling)
    return dataclasses.replace(template, **changes)  # type: ignore[arg-type]
