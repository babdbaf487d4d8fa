"""`logos batch TASKS.jsonl --out DIR`: the command's side of `logos.batch`.

Resolves the model, the runner and the limits as `logos run` does (flags, config file,
environment), refuses what cannot work before any task starts, and stops cleanly on Ctrl-C:
the first stops the running tasks (recorded `canceled`, run again next time), a second
quits at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import anyio

from logos.batch.display import Display, JsonDisplay, LineDisplay, TerminalDisplay
from logos.batch.driver import BatchError, BatchPlan, run_batch
from logos.batch.ray_pool import RayOptions, RayUnavailableError, import_ray
from logos.batch.settings import BatchSandbox, BatchSettings, ModelSpec
from logos.batch.summary import BatchSummary
from logos.batch.tasks import TaskFile, TaskFileError, read_task_file
from logos.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_STOPPED, CliError
from logos.cli.stopping import stop_signals
from logos.options.declarations import GGUF, PROMPT_EXTRA, SANDBOX, YES
from logos.options.option import Values
from logos.providers.choice import resolve_model_sync
from logos.runners.sandboxes import batch_sandbox_kind
from logos.settings import model_choice, resolution
from logos.settings.config_file import load_config_file
from logos.settings.resolution import config_path
from logos.settings.runners import sandbox_problem

GIB = 1024**3


def cmd_batch(args: argparse.Namespace, flags: Values) -> int:
    environ = os.environ
    config = load_config_file(config_path(flags), environ)
    if flags[GGUF] is not None:
        raise CliError(
            "logos batch needs a model server every task can reach: serve the GGUF with "
            "llama.cpp's server (llama-server -m MODEL.gguf) and pass --base-url"
        )
    sandbox = resolution.sandbox_choice(flags[SANDBOX], config[SANDBOX])
    if not sandbox and not flags[YES]:
        raise CliError(
            "logos batch runs every command unasked: pass --sandbox to run them in sandboxd, "
            "or --yes to run them with local bash (on this machine, or on each Ray node)"
        )
    task_file = _read_tasks(Path(args.tasks), sandbox is not None)
    spec = resolution.runner_spec(flags, config, sandbox)
    ray = _ray_options(args)
    if sandbox is not None:
        _require_batch_kind(sandbox)
        if ray is None:
            problem = sandbox_problem(spec)
            if problem is not None:
                raise CliError(problem)
    choice, note = resolve_model_sync(
        model_choice.choose_provider_for(flags, config, environ, None)
    )
    assert choice.model is not None  # resolve_model fills it in
    batch_settings = BatchSettings(
        model=ModelSpec(choice.kind.name, choice.model, choice.base_url, choice.api_key),
        sandbox=None if sandbox is None else BatchSandbox(sandbox, spec.sandbox_settings()),
        limits=resolution.limits(flags, config),
        timeout_s=resolution.command_timeout(flags, config),
        replies=resolution.replies(flags, config, choice),
        prompt_extra=config[PROMPT_EXTRA] or "",
        prepare=args.prepare,
        keep_workspaces=args.keep_workspaces,
    )
    plan = BatchPlan(
        task_file=task_file,
        out=args.out.expanduser().resolve(),
        settings=batch_settings,
        workers=args.workers,
        ray=ray,
        retry_failed=args.retry_failed,
    )
    display = _display(args.json)
    if note:
        display.notice(note)
    signals: list[int] = []
    try:
        summary = anyio.run(_run, plan, display, signals)
    except BatchError as exc:
        raise CliError(exc.message) from None
    except RayUnavailableError as exc:
        raise CliError(exc.message) from None
    if summary is None or signals:
        return 128 + signals[0] if signals else EXIT_INTERRUPTED
    everything_passed = summary.passed == summary.tasks and not summary.bad_lines
    return EXIT_OK if everything_passed else EXIT_STOPPED


def _read_tasks(path: Path, sandbox: bool) -> TaskFile:
    try:
        task_file = read_task_file(path)
    except TaskFileError as exc:
        raise CliError(exc.message) from None
    imaged = [task.id for task in task_file.tasks if task.image is not None]
    if imaged and not sandbox:
        shown = ", ".join(imaged[:5]) + (", …" if len(imaged) > 5 else "")
        raise CliError(
            f"{len(imaged)} tasks name an image ({shown}), which only the sandbox can use: "
            "add --sandbox"
        )
    if not task_file.tasks and not task_file.problems:
        raise CliError(f"{path} holds no task: write one JSON object per line")
    return task_file


def _require_batch_kind(name: str) -> None:
    """Refuse a sandbox kind a batch cannot run in before any task starts (on Ray too:
    the nodes run the kind this machine has)."""
    try:
        batch_sandbox_kind(name)
    except ValueError as exc:
        raise CliError(f"{exc}; or pass --yes to run the tasks with local bash") from None


def _ray_options(args: argparse.Namespace) -> RayOptions | None:
    if args.ray is None:
        if args.memory_per_task is not None or args.cpus_per_task != 1.0:
            raise CliError("--cpus-per-task and --memory-per-task apply to --ray only")
        return None
    try:
        import_ray()
    except RayUnavailableError as exc:
        raise CliError(exc.message) from None
    memory = None if args.memory_per_task is None else int(args.memory_per_task * GIB)
    return RayOptions(args.ray, args.cpus_per_task, memory)


def _display(json_events: bool) -> Display:
    if json_events:
        return JsonDisplay(sys.stdout, sys.stderr)
    if sys.stderr.isatty():
        return TerminalDisplay(sys.stderr)
    return LineDisplay(sys.stderr)


async def _run(plan: BatchPlan, display: Display, signals: list[int]) -> BatchSummary | None:
    """The batch under the stop signals; None when a second signal quit at once."""
    cancel = anyio.Event()

    def stop_gently(signum: int) -> None:
        display.notice(
            f"stopping ({signal.Signals(signum).name}): running tasks are canceled and "
            "recorded, the others stay to run next time (again to quit at once)"
        )
        cancel.set()

    summary: BatchSummary | None = None
    async with stop_signals(signals, stop_gently):
        summary = await run_batch(plan, display, cancel)
    return summary
