"""Many tasks at once on this machine, in one event loop.

Each task is a coroutine: while one waits for its model or a command, the others go on, so
a slow model call holds up no other task. At most `size` run at once (the workers asked
for, within the sandbox's session cap), in task file order. The tasks share one provider
(one pool of connections to the model).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import anyio

from logos.batch.display import Display
from logos.batch.execution import TaskRun, execute_task, unfinished_result
from logos.batch.prepared import PreparedSession
from logos.batch.results import TaskResult
from logos.batch.settings import BatchSettings
from logos.jsonl import utc_now
from logos.providers.base import Provider
from logos.runners.sandboxes import BatchSandboxKind


async def run_local(
    runs: Sequence[TaskRun],
    settings: BatchSettings,
    kind: BatchSandboxKind | None,
    size: int,
    cancel: anyio.Event,
    record: Callable[[TaskResult], None],
    display: Display,
    on_full: Callable[[], None],
    prepared: PreparedSession | None = None,
) -> None:
    """Run every task, `size` at a time, calling `record` as each ends. Once `cancel` is
    set, running tasks stop (recorded `canceled`) and the others do not start. `kind`: the
    sandbox kind of `settings.sandbox`; `prepared`: the session each task's forks."""
    provider = settings.model.open()
    limiter = anyio.CapacityLimiter(size)
    try:
        async with anyio.create_task_group() as group:
            for task_run in runs:
                group.start_soon(
                    _run_one,
                    task_run,
                    settings,
                    provider,
                    kind,
                    limiter,
                    cancel,
                    record,
                    display,
                    on_full,
                    prepared,
                )
    finally:
        with anyio.CancelScope(shield=True):
            await provider.aclose()


async def _run_one(
    task_run: TaskRun,
    settings: BatchSettings,
    provider: Provider,
    kind: BatchSandboxKind | None,
    limiter: anyio.CapacityLimiter,
    cancel: anyio.Event,
    record: Callable[[TaskResult], None],
    display: Display,
    on_full: Callable[[], None],
    prepared: PreparedSession | None,
) -> None:
    async with limiter:
        if cancel.is_set():
            return  # never started: it stays to run next time
        display.task_started(task_run.task.id)
        started, started_at = time.monotonic(), utc_now()
        try:
            result = await execute_task(
                task_run, settings, provider, cancel, kind=kind, prepared=prepared, on_full=on_full
            )
        except anyio.get_cancelled_exc_class():
            # A hard stop (a second Ctrl-C): the line still says the task did not finish.
            wall_s = time.monotonic() - started
            record(unfinished_result(task_run, "canceled", None, started_at, wall_s))
            raise
        record(result)
