"""A batch from start to end, for a front end: which tasks run, where, and what became of them.

The output directory belongs to one batch at a time (a lock file). Tasks that earlier runs
finished are skipped; the others run on the local pool or a Ray cluster; each result is
appended the moment it arrives, and the summary is written at the end, after Ctrl-C too.

    DIR/results.jsonl                    one line per run of a task (logos.batch.results)
    DIR/summary.json                     the batch in figures (logos.batch.summary)
    DIR/trajectories/ID-ATTEMPT.jsonl    each run's trajectory (logos.records.trajectory)
    DIR/workspaces/ID-ATTEMPT/           each local run's files (removed after it, unless kept)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from logos.batch.display import BatchStart, Display
from logos.batch.execution import TaskRun
from logos.batch.local_pool import run_local
from logos.batch.prepared import PreparedSession, PrepareError
from logos.batch.ray_pool import RayOptions, run_on_ray
from logos.batch.results import PastResults, ResultsFile, TaskResult, read_results
from logos.batch.sandbox_slots import pool_size
from logos.batch.settings import BatchSandbox, BatchSettings
from logos.batch.summary import BatchSummary, summarize, write_summary
from logos.batch.tasks import TaskFile, TaskSpec
from logos.errors import MessageError
from logos.jsonl import make_private_dir
from logos.options import ExecOptions
from logos.runners.sandboxes import BatchSandboxKind, ForkingSandboxKind, batch_sandbox_kind

_TRAJECTORIES = "trajectories"
_WORKSPACES = "workspaces"
_LOCK_NAME = ".lock"


class BatchError(MessageError):
    """The batch cannot run; the message says why and what to do."""


@dataclass(frozen=True)
class BatchPlan:
    task_file: TaskFile
    out: Path
    settings: BatchSettings
    workers: int = 1
    """Tasks at once on this machine (within the sandbox's session cap)."""
    ray: RayOptions | None = None
    """Run the tasks on a Ray cluster instead."""
    retry_failed: bool = False
    """Run failed and error tasks again (canceled and unstarted ones always run)."""


async def run_batch(plan: BatchPlan, display: Display, cancel: anyio.Event) -> BatchSummary:
    """Run the plan's pending tasks; setting `cancel` stops them (recorded `canceled`)."""
    started = time.monotonic()
    out = plan.out
    make_private_dir(out)
    with _owned(out):
        past = read_results(out)
        for warning in past.warnings:
            display.notice(warning)
        tasks = plan.task_file.tasks
        pending = [t for t in tasks if not past.is_done(t.id, retry_failed=plan.retry_failed)]
        runs = [_task_run(task, past, out) for task in pending]
        _check_prepare(plan, pending)
        size = plan.workers
        sandbox = plan.settings.sandbox
        kind = None
        if plan.ray is None and sandbox is not None:
            # WHY once here: each task on this machine needs it, and finding it takes a while.
            kind = _batch_kind(sandbox)
            size = await _local_pool_size(plan.workers, kind, sandbox, display)
        display.start(
            BatchStart(
                tasks=len(tasks),
                to_run=len(runs),
                skipped=len(tasks) - len(runs),
                where=_where(plan, size),
            ),
            plan.task_file.problems,
        )
        latest = dict(past.latest)
        full_noticed: list[bool] = []

        def on_full() -> None:
            if not full_noticed:
                full_noticed.append(True)
                display.notice(
                    "the sandbox is full (429: its session cap): tasks wait for a session to "
                    "end, then go on"
                )

        with ResultsFile.open(out) as results:

            def record(result: TaskResult) -> None:
                results.record(result)
                latest[result.id] = result
                display.task_ended(result)

            prepared = None
            try:
                if plan.ray is not None:
                    await run_on_ray(runs, plan.settings, plan.ray, cancel, record, display)
                else:
                    if plan.settings.prepare is not None and runs:
                        prepared = await _prepare(plan, kind, display, on_full)
                    await run_local(
                        runs, plan.settings, kind, size, cancel, record, display, on_full, prepared
                    )
            finally:
                if prepared is not None:
                    await prepared.aclose()
                summary = summarize(
                    (task.id for task in tasks),
                    latest,
                    bad_lines=len(plan.task_file.problems),
                    elapsed_s=time.monotonic() - started,
                )
                write_summary(out, summary)
                display.finish(summary)
    return summary


def _task_run(task: TaskSpec, past: PastResults, out: Path) -> TaskRun:
    attempt = past.next_attempt(task.id)
    name = f"{task.id}-{attempt}"
    trajectory = Path(_TRAJECTORIES) / f"{name}.jsonl"
    return TaskRun(
        task=task,
        attempt=attempt,
        workspace=out / _WORKSPACES / name,
        trajectory=out / trajectory,
        trajectory_name=str(trajectory),
        node=socket.gethostname(),
    )


def _check_prepare(plan: BatchPlan, pending: list[TaskSpec]) -> None:
    """Refuse, before anything runs, a preparation the batch cannot use."""
    settings = plan.settings
    if settings.prepare is None:
        return
    if settings.sandbox is None:
        raise BatchError("--prepare prepares a sandbox session: add --sandbox")
    if plan.ray is not None:
        raise BatchError(
            "--prepare runs on this machine's sandbox, and --ray runs the tasks on other "
            "nodes: give each task a setup instead"
        )
    image = settings.sandbox.settings.image
    other = [task for task in pending if task.image is not None and task.image != image]
    if other:
        raise BatchError(
            f"task {other[0].id} asks for image {other[0].image}, and the "
            "prepared session runs the batch's image (each task's session is a copy of it): "
            "run the tasks of other images in a batch of their own"
        )


async def _prepare(
    plan: BatchPlan, kind: BatchSandboxKind | None, display: Display, on_full: Callable[[], None]
) -> PreparedSession:
    """The batch's prepared session, started; BatchError when it cannot be."""
    settings, sandbox = plan.settings, plan.settings.sandbox
    assert settings.prepare is not None and sandbox is not None
    if not isinstance(kind, ForkingSandboxKind):
        raise BatchError(
            f"--prepare needs a sandbox kind that forks sessions, and {sandbox.kind!r} does "
            "not: use sandboxd, or give each task a setup instead"
        )
    options = ExecOptions(
        allowed_hosts=sandbox.settings.allowed_hosts, timeout_s=settings.timeout_s
    )
    prepared = PreparedSession(kind, sandbox, settings.prepare, options, on_full)
    display.notice(f"preparing the sandbox session: {settings.prepare}")
    try:
        await prepared.start()
    except PrepareError as exc:
        raise BatchError(f"{exc}; no task ran") from None
    display.notice(f"prepared in {prepared.duration_s:.1f} s: each task starts from a copy of it")
    return prepared


def _batch_kind(sandbox: BatchSandbox) -> BatchSandboxKind:
    try:
        return batch_sandbox_kind(sandbox.kind)
    except ValueError as exc:
        raise BatchError(str(exc)) from None


async def _local_pool_size(
    workers: int, kind: BatchSandboxKind, sandbox: BatchSandbox, display: Display
) -> int:
    """The workers asked for, lowered to the sandbox's session cap (with a notice)."""
    cap = await anyio.to_thread.run_sync(kind.session_cap, sandbox.settings)
    size = pool_size(workers, cap)
    if size < workers:
        display.notice(
            f"{size} tasks at once, not {workers}: the sandbox lets one caller hold "
            f"{cap} sessions (max_sessions_per_caller)"
        )
    return size


def _where(plan: BatchPlan, size: int) -> str:
    runner = "local bash" if plan.settings.sandbox is None else "the sandbox"
    if plan.ray is not None:
        return f"the Ray cluster at {plan.ray.address} ({runner} on each node)"
    workers = f"{size} worker{'' if size == 1 else 's'}"
    return f"{workers} on this machine ({runner})"


@contextlib.contextmanager
def _owned(out: Path) -> Iterator[None]:
    """Hold the output directory's lock: two batches must not append to one results file."""
    lock = out / _LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BatchError(
                f"another logos batch is using {out}: wait for it to end, or choose another --out"
            ) from None
        yield
    finally:
        os.close(fd)
