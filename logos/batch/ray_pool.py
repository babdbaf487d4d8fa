"""Tasks as Ray tasks, across the nodes of a cluster.

Ray places each task by the resources it declares (CPUs, memory). On its node the task makes
its workspace in the node's scratch space and runs with the node's runner: local bash, or
the node's sandboxd (started there on demand when none answers on its socket). As it goes,
it streams its trajectory's new lines back (a Ray streaming generator), and its result
last; the driver writes both into the output directory as they arrive, so a lost node
loses nothing the task had sent. A node lost mid-task ends its tasks as `error` with Ray's
reason (`--retry-failed` runs them again). On Ctrl-C the running tasks are told to stop
(through a small actor they ask) and end as `canceled` with their whole trajectory; those
not started stay to run next time.

Ray is optional (`pip install 'logos[ray]'`) and imported only here, when `--ray` is used.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from logos.batch.display import Display
from logos.batch.execution import TaskRun, execute_task, unfinished_result
from logos.batch.results import TaskResult
from logos.batch.settings import BatchSettings
from logos.batch.tasks import TaskSpec
from logos.errors import MessageError
from logos.jsonl import open_private_append, utc_now, write_line
from logos.runners.sandboxes import batch_sandbox_kind

INSTALL_HINT = "pip install 'logos[ray]'"
_CANCEL_GRACE_S = 15.0
"""After Ctrl-C, how long running tasks get to stop cleanly (close their sandbox session)
before their workers are killed."""
_WAKE_S = 0.2
"""How often a task on its node looks for new trajectory lines to send (it is also woken at
once when a step is recorded)."""
_ASK_STOP_S = 0.5
"""How often a running task asks whether the batch was stopped."""
_REASON_CHARS = 1000


class RayUnavailableError(MessageError):
    """Ray is not installed, or the cluster cannot be reached; the message says what to do."""


@dataclass(frozen=True)
class RayOptions:
    address: str
    """The cluster (`host:port`), or "auto" for the one this machine belongs to."""
    cpus_per_task: float = 1.0
    memory_per_task: int | None = None
    """Bytes Ray reserves for each task on its node (None: no reservation)."""


@dataclass(frozen=True)
class _Started:
    node: str


@dataclass(frozen=True)
class _Lines:
    lines: tuple[str, ...]


@dataclass(frozen=True)
class _Finished:
    result: TaskResult


def import_ray() -> ModuleType:
    """The `ray` module, or a RayUnavailableError saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RayUnavailableError(
            f"--ray needs Ray, which is not installed: {INSTALL_HINT} (on the driver and on "
            "every node of the cluster)"
        ) from None


async def run_on_ray(
    runs: Sequence[TaskRun],
    settings: BatchSettings,
    options: RayOptions,
    cancel: anyio.Event,
    record: Callable[[TaskResult], None],
    display: Display,
) -> None:
    """Run every task on the cluster at `options.address`, calling `record` as each ends."""
    ray = import_ray()
    await anyio.to_thread.run_sync(_connect, ray, options.address)
    try:
        remote = ray.remote(_task_on_node).options(
            num_cpus=options.cpus_per_task,
            memory=options.memory_per_task,
            max_retries=0,  # WHY: a task on a lost node is recorded as failed, not rerun
        )
        # WHY on the driver's node: a lost worker node must not take the flag with it.
        strategies = importlib.import_module("ray.util.scheduling_strategies")
        here = strategies.NodeAffinitySchedulingStrategy(
            node_id=ray.get_runtime_context().get_node_id(), soft=False
        )
        stop = ray.remote(num_cpus=0)(StopFlag).options(scheduling_strategy=here).remote()
        generators = {
            run.task.id: remote.remote(run.task, run.attempt, run.trajectory_name, settings, stop)
            for run in runs
        }
        following = set(generators)  # the tasks whose stream the driver still reads
        async with anyio.create_task_group() as stopper:
            stopper.start_soon(_stop_when_canceled, ray, generators, stop, following, cancel)
            async with anyio.create_task_group() as followers:
                for task_run in runs:
                    generator = generators[task_run.task.id]
                    followers.start_soon(
                        _follow, ray, task_run, generator, following, cancel, record, display
                    )
            stopper.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(ray.shutdown)


class StopFlag:
    """A Ray actor the running tasks ask whether the batch was stopped (Ctrl-C): a task told
    so stops its run and still sends its last lines and its result, which a task that Ray
    cancels cannot.

    WHY it also keeps which tasks began: the driver learns that a task began from the task's
    stream, which may lag behind; cancelling the tasks it had not heard from yet also
    cancelled ones already running (ended without their result). An actor runs one call at
    a time, so a task either began before `stop` (and is told to stop) or is refused."""

    def __init__(self) -> None:
        self._stopped = False
        self._began: set[str] = set()

    def begin(self, task_id: str) -> bool:
        """Whether the task may begin: not once the batch is stopped."""
        if not self._stopped:
            self._began.add(task_id)
        return not self._stopped

    def stop(self) -> set[str]:
        """Stop the batch; the tasks that began before it."""
        self._stopped = True
        return self._began

    def stopped(self) -> bool:
        return self._stopped


async def _stop_when_canceled(
    ray: ModuleType,
    generators: dict[str, Any],
    stop: Any,
    following: set[str],
    cancel: anyio.Event,
) -> None:
    """On Ctrl-C: tasks not started never start; running ones are told to stop, and those
    still running after a grace period are cancelled by Ray, then killed."""
    await cancel.wait()
    try:
        began = await stop.stop.remote()
    except ray.exceptions.RayError:
        # WHY: with the flag's actor gone, which tasks began is unknown, and a running task
        # that Ray cancels ends without its result: every task followed gets the grace.
        began = set(following)
    for task_id in following - began:
        ray.cancel(generators[task_id])
    for force in (False, True):
        with anyio.move_on_after(_CANCEL_GRACE_S):
            # WHY wait: a task closes its sandbox session and sends what it recorded first.
            while following:
                await anyio.sleep(0.1)
        for task_id in following:
            ray.cancel(generators[task_id], force=force)


def _connect(ray: ModuleType, address: str) -> None:
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnavailableError(
            f"cannot reach the Ray cluster at {address!r} ({exc}): start it with `ray start "
            "--head`, or give its address (host:port) with --ray"
        ) from None


async def _follow(
    ray: ModuleType,
    task_run: TaskRun,
    generator: Any,
    following: set[str],
    cancel: anyio.Event,
    record: Callable[[TaskResult], None],
    display: Display,
) -> None:
    """Write what the task sends as it arrives; record how it ended, also when it failed."""
    node: str | None = None
    began, began_at = time.monotonic(), utc_now()
    trajectory: int | None = None
    try:
        async for reference in generator:
            event = await reference
            if isinstance(event, _Started):
                node = event.node
                display.task_started(task_run.task.id)
            elif isinstance(event, _Lines):
                if trajectory is None:
                    trajectory = open_private_append(task_run.trajectory)
                for line in event.lines:
                    write_line(trajectory, line)
            elif isinstance(event, _Finished):
                record(event.result)
                return
    except ray.exceptions.RayError as exc:
        if node is None:
            return  # canceled before it started: it stays to run next time
        here = replace(task_run, node=node)
        wall_s = time.monotonic() - began
        if cancel.is_set():
            record(unfinished_result(here, "canceled", None, began_at, wall_s))
        else:
            reason = f"the task's Ray worker or node failed: {_reason(exc)}"
            record(unfinished_result(here, "error", reason, began_at, wall_s))
    finally:
        following.discard(task_run.task.id)
        if trajectory is not None:
            os.close(trajectory)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS] + "…"


def _task_on_node(
    task: TaskSpec, attempt: int, trajectory_name: str, settings: BatchSettings, stop: Any
) -> Iterator[_Started | _Lines | _Finished]:
    """The Ray task: run one task on this node, sending its trajectory as it is written."""
    ray = import_ray()
    if not _may_begin(ray, stop, task.id):
        return  # the batch was stopped before this task began: it stays to run next time
    node = ray.get_runtime_context().get_node_id()
    yield _Started(node)
    scratch = Path(tempfile.mkdtemp(prefix="logos-batch-"))
    task_run = TaskRun(
        task=task,
        attempt=attempt,
        workspace=scratch / "workspace",
        trajectory=scratch / "trajectory.jsonl",
        trajectory_name=trajectory_name,
        node=node,
    )
    node_run = _NodeRun(task_run, settings)
    asked = time.monotonic()
    try:
        node_run.thread.start()
        while node_run.thread.is_alive():
            node_run.wake.wait(_WAKE_S)
            node_run.wake.clear()
            lines = node_run.new_lines()
            if lines:
                yield _Lines(lines)
            if time.monotonic() - asked >= _ASK_STOP_S:
                asked = time.monotonic()
                if _stopped(ray, stop):
                    node_run.stop()
        lines = node_run.new_lines()
        if lines:
            yield _Lines(lines)
        yield _Finished(node_run.outcome())
    except KeyboardInterrupt:  # cancelled by Ray after the grace period
        node_run.stop()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _may_begin(ray: ModuleType, stop: Any, task_id: str) -> bool:
    """Whether the batch still runs (the task is noted as begun); a flag that cannot be
    reached lets it begin, as `_stopped` lets it run."""
    return _ask(ray, stop.begin.remote(task_id), unreachable=True)


def _stopped(ray: ModuleType, stop: Any) -> bool:
    """Whether the batch was stopped; a flag that cannot be reached (its driver is gone)
    leaves the task running, as Ray ends the tasks of a driver that left."""
    return _ask(ray, stop.stopped.remote(), unreachable=False)


def _ask(ray: ModuleType, answer: Any, *, unreachable: bool) -> bool:
    """The stop flag's answer, waited for on its future, not with `ray.get`.

    WHY: Ray lends the CPUs of a task blocked in `ray.get` to the tasks waiting for one, so
    a task asking the flag every half second let a third task start on a two-CPU cluster
    (measured: two 1-CPU tasks overlapping on a 1-CPU node), past `--cpus-per-task`."""
    try:
        return bool(answer.future().result(timeout=_ASK_STOP_S * 10))
    except (ray.exceptions.RayError, concurrent.futures.TimeoutError):
        return unreachable


class _NodeRun:
    """One task running in its own event loop on a thread of the Ray worker, so that the
    worker's main thread can send its trajectory while it runs, and pass on a cancel."""

    def __init__(self, task_run: TaskRun, settings: BatchSettings) -> None:
        self.task_run = task_run
        self.settings = settings
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._main, name="logos-task", daemon=True)
        self._sent = 0
        self._result: TaskResult | None = None
        self._failure: BaseException | None = None
        self._cancel: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._ready = threading.Event()

    def new_lines(self) -> tuple[str, ...]:
        """The trajectory's lines written since the last call (whole lines only)."""
        try:
            with open(self.task_run.trajectory, "rb") as handle:
                handle.seek(self._sent)
                data = handle.read()
        except FileNotFoundError:
            return ()
        end = data.rfind(b"\n") + 1
        self._sent += end
        return tuple(line.decode() for line in data[:end].splitlines())

    def outcome(self) -> TaskResult:
        if self._result is None:
            raise RuntimeError(f"the task's event loop failed: {self._failure!r}")
        return self._result

    def stop(self) -> None:
        self._ready.wait()
        if self._cancel is not None and self._token is not None and self.thread.is_alive():
            anyio.from_thread.run_sync(self._cancel.set, token=self._token)
        self.thread.join()

    def _main(self) -> None:
        try:
            self._result = anyio.run(self._run)
        except BaseException as exc:
            self._failure = exc
        finally:
            self._ready.set()
            self.wake.set()

    async def _run(self) -> TaskResult:
        self._cancel = anyio.Event()
        self._token = anyio.lowlevel.current_token()
        self._ready.set()
        settings = self.settings
        kind = None
        if settings.sandbox is not None:
            try:
                kind = batch_sandbox_kind(settings.sandbox.kind)
                await anyio.to_thread.run_sync(kind.ensure_running, settings.sandbox.settings)
            except ValueError as exc:
                began = utc_now()
                return unfinished_result(self.task_run, "error", f"sandbox: {exc}", began, 0.0)
        provider = settings.model.open()
        try:
            return await execute_task(
                self.task_run,
                settings,
                provider,
                self._cancel,
                kind=kind,
                on_recorded=self.wake.set,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await provider.aclose()
