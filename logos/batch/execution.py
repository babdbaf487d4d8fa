"""One run of one task: a fresh workspace, its setup, the agent, its check.

Setup, agent and check share one runner, so they see the same files: local bash in the
workspace, or (with a sandbox) one fresh session that sees only the workspace, read-write
(with a prepared session, a fork of it: logos.batch.prepared).
Whatever goes wrong — a workspace that cannot be made, a setup that fails, a model that
stops answering, a bug — ends as a `TaskResult` holding the error: one task never takes
the batch down. Setting `cancel` stops the task where it is and ends it as `canceled`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio

from logos.agent.config import Config
from logos.agent.steps import StepMessage, StopReason
from logos.assembly import RunAssembly, RunParts
from logos.batch.prepared import PreparedSession, PrepareError
from logos.batch.results import CHECK_OUTPUT_CHARS, Status, TaskResult
from logos.batch.sandbox_slots import WaitWhenFull
from logos.batch.settings import BatchSettings
from logos.batch.tasks import TaskSpec
from logos.batch.workspace import WorkspaceError, make_workspace, remove_workspace
from logos.ceiling import CeilingError, ceiling_of
from logos.closing import close_bounded
from logos.errors import RecordFileError
from logos.jsonl import utc_now
from logos.options import AllowedPath, ExecOptions
from logos.protocol.envelope import format_results
from logos.protocol.prompt import build_system_prompt
from logos.providers.base import Provider, Usage
from logos.records.events import RunEvents, RunSummary
from logos.records.trajectory import RunHeader, TrajectoryWriter
from logos.result import Result
from logos.runners.base import Runner
from logos.runners.local import LocalRunner
from logos.runners.sandboxes import BatchSandboxKind
from logos.version import logos_version

T = TypeVar("T")


@dataclass(frozen=True)
class TaskRun:
    """One run of a task, and where it works and writes."""

    task: TaskSpec
    attempt: int
    workspace: Path
    trajectory: Path
    trajectory_name: str
    """The trajectory as the results line names it (relative to the output directory)."""
    node: str


@dataclass
class _Outcome:
    """What is known so far; every phase fills in its part."""

    status: Status = "error"
    error: str | None = None
    stop_reason: StopReason | None = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    check_exit_code: int | None = None
    check_output: str | None = None
    recorded: bool = False
    """The trajectory file was created."""


class _Canceled:
    """What a phase returns when the batch's cancel event stopped it."""


_CANCELED = _Canceled()


async def execute_task(
    task_run: TaskRun,
    settings: BatchSettings,
    provider: Provider,
    cancel: anyio.Event,
    *,
    kind: BatchSandboxKind | None,
    prepared: PreparedSession | None = None,
    on_full: Callable[[], None] | None = None,
    on_recorded: Callable[[], None] | None = None,
) -> TaskResult:
    """Run the task to its end and say how it went; never raises for the task's failures.

    `kind`: the sandbox kind of `settings.sandbox`, looked up once by the caller (finding it
    reads every installed package's entry points: tens of milliseconds a task);
    `prepared`: the batch's prepared session, which the task's session forks; `on_full`:
    the sandbox refused a command for being full (it is retried); `on_recorded`: a line
    was added to the trajectory file."""
    started, started_at = time.monotonic(), utc_now()
    outcome = _Outcome()
    try:
        await _phases(
            task_run, settings, provider, kind, prepared, cancel, outcome, on_full, on_recorded
        )
    except Exception as exc:  # a bug must not take the batch down
        outcome.status, outcome.error = "error", f"internal error: {type(exc).__name__}: {exc}"
    finally:
        if not settings.keep_workspaces:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_workspace, task_run.workspace)
    return TaskResult(
        id=task_run.task.id,
        attempt=task_run.attempt,
        status=outcome.status,
        stop_reason=outcome.stop_reason,
        steps=outcome.turns,
        usage=outcome.usage,
        cost_usd=outcome.cost_usd,
        wall_s=time.monotonic() - started,
        error=outcome.error,
        check_exit_code=outcome.check_exit_code,
        check_output=outcome.check_output,
        node=task_run.node,
        trajectory=task_run.trajectory_name if outcome.recorded else None,
        started_at=started_at,
        ended_at=utc_now(),
    )


def unfinished_result(
    task_run: TaskRun, status: Status, error: str | None, started_at: str, wall_s: float
) -> TaskResult:
    """The result of a run stopped from outside (a hard cancel, a lost node): what is known
    is where it ran and for how long; its trajectory holds what it did."""
    return TaskResult(
        id=task_run.task.id,
        attempt=task_run.attempt,
        status=status,
        wall_s=wall_s,
        error=error,
        node=task_run.node,
        trajectory=task_run.trajectory_name if task_run.trajectory.exists() else None,
        started_at=started_at,
        ended_at=utc_now(),
    )


async def _phases(
    task_run: TaskRun,
    settings: BatchSettings,
    provider: Provider,
    kind: BatchSandboxKind | None,
    prepared: PreparedSession | None,
    cancel: anyio.Event,
    outcome: _Outcome,
    on_full: Callable[[], None] | None,
    on_recorded: Callable[[], None] | None,
) -> None:
    task, workspace = task_run.task, task_run.workspace
    try:
        made = await _unless_canceled(cancel, lambda: make_workspace(task.workspace, workspace))
    except WorkspaceError as exc:
        outcome.error = f"workspace: {exc.message}"
        return
    if made is _CANCELED:
        outcome.status = "canceled"
        return
    allowed = (AllowedPath(path=str(workspace), read_only=False),)
    try:
        # WHY pinned once made: the workspace is the task's ceiling, so a sandbox never mounts
        # what its name leads to after a swap (logos.ceiling).
        ceiling = ceiling_of(allowed)
    except CeilingError as exc:
        outcome.error = f"workspace: {exc}"
        return
    options = ExecOptions(
        allowed_paths=allowed,
        allowed_hosts=() if settings.sandbox is None else settings.sandbox.settings.allowed_hosts,
        timeout_s=settings.timeout_s,
        path_ceiling=ceiling,
    )
    try:
        opened = await _unless_canceled(
            cancel, lambda: _open_runner(task, settings, kind, prepared, options, on_full)
        )
    except (ValueError, PrepareError) as exc:
        outcome.error = f"sandbox: {exc}"
        return
    if isinstance(opened, _Canceled):
        outcome.status = "canceled"
        return
    runner, system_prompt = opened
    try:
        async with _preparing(runner, options):
            if task.setup is not None:
                setup = await _unless_canceled(
                    cancel, lambda: runner.run(task.setup or "", options)
                )
                if isinstance(setup, _Canceled):
                    outcome.status = "canceled"
                    return
                if not setup.ok:
                    outcome.error = f"setup failed: {_tail(setup)}"
                    return
            await _agent(
                task_run,
                settings,
                provider,
                runner,
                options,
                system_prompt,
                cancel,
                outcome,
                on_recorded or _nothing,
            )
            if outcome.stop_reason in ("canceled", "error"):
                outcome.status = "canceled" if outcome.stop_reason == "canceled" else "error"
                return
            await _judge(task, runner, options, cancel, outcome)
    finally:
        await close_bounded(runner.aclose)


@contextlib.asynccontextmanager
async def _preparing(runner: Runner, options: ExecOptions) -> AsyncIterator[None]:
    """The runner prepares (starts its sandbox) while the task's phases run, until they end.

    WHY the task and not only the agent's run: the run prepares too, but cancels that at its
    end, and an agent that answers without a command ends before its sandbox has started:
    the check would start it again, a second container for one task. The run's own
    preparation joins this one."""
    async with anyio.create_task_group() as preparing:
        preparing.start_soon(runner.prepare, options)
        try:
            yield
        finally:
            preparing.cancel_scope.cancel()


async def _open_runner(
    task: TaskSpec,
    settings: BatchSettings,
    kind: BatchSandboxKind | None,
    prepared: PreparedSession | None,
    options: ExecOptions,
    on_full: Callable[[], None] | None,
) -> tuple[Runner, str]:
    """The task's runner and the system prompt that describes it; ValueError (or
    PrepareError) when the sandbox cannot be used."""
    workdir = options.resolved_workdir() or ""
    if settings.sandbox is None:
        prompt = build_system_prompt(
            working_dir=workdir, extra=settings.prompt_extra, style=settings.replies.prompt_style
        )
        return LocalRunner(), prompt
    if kind is None:
        # WHY fail: a task asked for the sandbox must never fall back to this machine's bash.
        raise ValueError("no sandbox kind was given for a batch that runs in the sandbox")
    sandbox = dataclasses.replace(
        settings.sandbox.settings,
        image=task.image or settings.sandbox.settings.image,
        allowed_paths=options.allowed_paths,
        session=None,  # WHY: a fresh session for each task, whatever the settings say
    )
    prompt = build_system_prompt(
        working_dir=workdir,
        platform=kind.platform,
        extra=settings.prompt_extra,
        style=settings.replies.prompt_style,
        sandbox_note=kind.prompt_note(sandbox),
    )
    if prepared is not None:
        return await prepared.fork(options), prompt
    return WaitWhenFull(kind.open(sandbox), kind, on_full), prompt


async def _agent(
    task_run: TaskRun,
    settings: BatchSettings,
    provider: Provider,
    runner: Runner,
    options: ExecOptions,
    system_prompt: str,
    cancel: anyio.Event,
    outcome: _Outcome,
    on_recorded: Callable[[], None],
) -> None:
    task = task_run.task
    header = RunHeader(
        logos_version=logos_version(),
        provider=settings.model.provider,
        model=settings.model.model,
        base_url=settings.model.base_url,
        runner="local" if settings.sandbox is None else "sandbox",
        sandbox=None if settings.sandbox is None else settings.sandbox.kind,
        cwd=str(task_run.workspace),
        started_at=utc_now(),
        system_prompt=system_prompt,
    )
    config = Config(
        provider=provider,
        model=settings.model.model,
        system_prompt=system_prompt,
        exec_options=options,
        # WHY no loop commands (the memory notes' remember/recall/forget): tasks are
        # independent tries; notes shared between them, or with the user's own runs,
        # would make one task's result depend on the others.
    )
    parts = RunParts(
        config=settings.replies.apply(task.limits(settings.limits).applied_to(config)),
        prompt=task.prompt,
        history=[],
        open_runner=lambda: runner,
        open_trajectory=partial(TrajectoryWriter.create, task_run.trajectory, header),
        observer=_Recorded(on_recorded),
        approval=None,
        runner_kind=header.runner,
        cwd=header.cwd,
        closes_runner=False,  # WHY: the task's check runs on it next
    )
    try:
        assembly = await RunAssembly.open(parts)
    except (FileExistsError, RecordFileError) as exc:
        outcome.error = f"trajectory: {exc}"
        outcome.stop_reason = "error"
        return
    outcome.recorded = True
    summary = await assembly.run(cancel)
    outcome.stop_reason, outcome.error = summary.stop_reason, summary.error
    outcome.usage, outcome.cost_usd, outcome.turns = summary.usage, summary.cost_usd, summary.turns


class _Recorded(RunEvents):
    """Tells the batch each time its trajectory grew by a step or by the run's end (a Ray
    node then sends the new lines); nobody watches the rest of the run's events."""

    def __init__(self, on_recorded: Callable[[], None]) -> None:
        super().__init__(lambda event: None)
        self._on_recorded = on_recorded

    def step_end(self, turn: int, step: StepMessage) -> None:
        self._on_recorded()

    def done(self, summary: RunSummary) -> None:
        self._on_recorded()


async def _judge(
    task: TaskSpec,
    runner: Runner,
    options: ExecOptions,
    cancel: anyio.Event,
    outcome: _Outcome,
) -> None:
    """Success: the check exits 0; without a check, the agent gave its final answer."""
    if task.check is None:
        outcome.status = "passed" if outcome.stop_reason == "final" else "failed"
        return
    check = await _unless_canceled(cancel, lambda: runner.run(task.check or "", options))
    if isinstance(check, _Canceled):
        outcome.status = "canceled"
        return
    outcome.check_exit_code = check.exit_code
    if check.ok:
        outcome.status = "passed"
    else:
        outcome.status = "failed"
        outcome.check_output = _tail(check)


async def _unless_canceled(cancel: anyio.Event, work: Callable[[], Awaitable[T]]) -> T | _Canceled:
    """`work`'s value, or `_CANCELED` once `cancel` is set (the work is then cancelled)."""
    if cancel.is_set():
        return _CANCELED
    done: list[T] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as group:

        async def do_work() -> None:
            try:
                done.append(await work())
            except Exception as exc:  # raised below, outside the task group's wrapper
                failed.append(exc)
            finally:
                group.cancel_scope.cancel()

        group.start_soon(do_work)
        await cancel.wait()
        group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return done[0] if done else _CANCELED


def _nothing() -> None:
    return None


def _tail(result: Result) -> str:
    """The end of what a command said, as the model would read it (exit code, output)."""
    text = format_results([result])
    return text if len(text) <= CHECK_OUTPUT_CHARS else "…" + text[-CHECK_OUTPUT_CHARS:]
