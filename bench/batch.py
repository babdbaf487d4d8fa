"""Family 6: `logos batch`, many small tasks, on the local pool and on a two-node Ray cluster.

Every task is the same: a copy of a one-file workspace, a model (bench/wire_model.py, over
real HTTP) that asks for `<cmd>true</cmd>` and then answers, and the check `true`. The real
command runs in its own process (`python -m logos batch`), as users run it: with local
bash at several worker counts, with the sandbox (a daemon of its own; each task a fresh
session) and on a real two-node Ray cluster (bench/ray_cluster.py).

The harness's own overhead per task is the batch's wall time minus the wall time of the
same runs without the harness (the agent loop and the check, at the same concurrency, with
the same kind of runner, a fresh one per task: a sandbox session's start is in both), over
the number of tasks. What is left is the harness: the workspace copies, the trajectories,
the results lines, the summary. Each level runs in rounds, a batch and its baseline in turn
first, and the figure is the median of the rounds'. The batch's time is its own (`elapsed_s`
of summary.json, the interpreter's start-up left out); memory is the `logos batch` process's
peak RSS.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio

import logos
from bench.daemon import check_image, running_daemon
from bench.memory import PeakRss
from bench.plan import Plan
from bench.ray_cluster import REPO, ray_cluster
from bench.results import Section, Target, mib, ms
from bench.wire_model import API_KEY, MODEL, WireModel
from logos.agent.config import Config
from logos.batch.settings import ModelSpec
from logos.options import AllowedPath, ExecOptions
from logos.protocol.prompt import build_system_prompt
from logos.runners.base import Runner
from logos.runners.local import LocalRunner
from sandboxd.client.runner import SandboxRunner

FAMILY = "batch"
TITLE = "logos batch: tasks of one `true` command and a `true` check"
TARGET_OVERHEAD_MS = 50.0
TARGET_SANDBOX_TASKS_PER_S = 5.0
PROMPT = "Run true, then say you are done."
CHECK = "true"
BATCH_TIMEOUT_S = 1800.0
"""A batch that has not ended by then hangs: the family reports it instead of waiting."""
RAY_WORKERS = 2
"""The two-node cluster's CPUs (one per node): tasks it runs at once."""
RunnerFactory = Callable[[], Runner]
SANDBOX_POOLED = "sandbox with a warm pool"
SANDBOX_PREPARED = "sandbox, each task a fork of a prepared session"
PREPARE = "mkdir -p ~/tools && head -c 1000000 /dev/urandom > ~/tools/blob"
"""The batch's preparation in that row: a megabyte of state every task's session copies."""


@dataclass
class Level:
    """One run of the batch, and its baseline."""

    where: str
    """"local", "sandbox", SANDBOX_PREPARED, SANDBOX_POOLED or "ray"."""
    workers: int
    tasks: int
    passed: int = 0
    elapsed_s: float = 0.0
    """The batch's own wall time (summary.json's elapsed_s)."""
    process_s: float = 0.0
    """The `logos batch` process, start to exit (interpreter start-up included)."""
    baseline_s: float = 0.0
    peak_rss_bytes: int = 0
    nodes: dict[str, int] = field(default_factory=dict)
    """Tasks per node that ran them."""
    round_overheads_s: list[float] = field(default_factory=list)
    """Each round's (batch - baseline) / tasks."""
    errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.where == "ray":
            return "Ray, 2 nodes"
        return f"{self.where}, {self.workers} worker{'' if self.workers == 1 else 's'}"

    @property
    def tasks_per_s(self) -> float:
        return self.tasks / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def overhead_s(self) -> float:
        """The harness's own time per task, beyond the same runs without it: the median of
        the rounds' (WHY: a burst of load in one round, which moves container starts by
        hundreds of milliseconds, must not decide the figure)."""
        return statistics.median(self.round_overheads_s) if self.round_overheads_s else math.nan


def write_task_file(directory: Path, tasks: int) -> Path:
    """`tasks` identical tasks on a one-file workspace, beside it in `directory`."""
    workspace = directory / "workspace"
    workspace.mkdir()
    (workspace / "README").write_text("a workspace for the batch benchmark\n")
    path = directory / "tasks.jsonl"
    lines = [
        json.dumps(
            {"id": f"t{n}", "prompt": PROMPT, "workspace": {"copy": "workspace"}, "check": CHECK}
        )
        for n in range(tasks)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_batch_command(
    level: Level, task_file: Path, where_args: Sequence[str], model: WireModel, env: dict[str, str]
) -> None:
    """`python -m logos batch` to its end, watched for memory; adds its figures to `level`."""
    out = task_file.parent / "out"
    command = [
        *(sys.executable, "-m", "logos", "batch", str(task_file), "--out", str(out)),
        *("--provider", "openai", "--model", MODEL, "--base-url", model.base_url),
        *where_args,
    ]
    log = task_file.parent / f"{out.name}.log"
    started = time.perf_counter()
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env, cwd=REPO
        )
        with PeakRss(process.pid) as rss:
            try:
                process.wait(BATCH_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                level.errors.append(f"the batch did not end within {BATCH_TIMEOUT_S:g} s")
    level.process_s += time.perf_counter() - started
    level.peak_rss_bytes = max(level.peak_rss_bytes, rss.peak_bytes)
    summary_path = out / "summary.json"
    if not summary_path.exists():
        tail = log.read_text(errors="replace")[-1000:]
        level.errors.append(f"no summary (exit {process.returncode}): {tail}")
        return
    summary = json.loads(summary_path.read_text())
    level.elapsed_s += summary["elapsed_s"]
    level.passed += summary["passed"]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    level.nodes = dict(Counter(str(result["node"]) for result in results) + Counter(level.nodes))
    for result in results:
        if result["status"] != "passed":
            level.errors.append(f"{result['id']}: {result['status']}: {result['error']}")


async def bare_runs(
    tasks: int, concurrency: int, model: WireModel, workspace: Path, open_runner: RunnerFactory
) -> tuple[float, list[str]]:
    """The same runs without the harness: each task's loop and check with a fresh runner, in
    an empty directory of its own under `workspace` (no copy), `concurrency` at a time. Its
    wall time, and what went wrong.

    WHY a directory each: as each task of the batch mounts its own, each run asks the
    sandbox for a new spec; one shared directory would have a warm pool keep (and refill)
    sandboxes for it, and the batch's rounds would pay for that."""
    provider = ModelSpec("openai", MODEL, model.base_url, API_KEY).open()
    places = [workspace / f"run-{n}" for n in range(tasks)]
    for place in places:
        place.mkdir(parents=True)
    limiter = anyio.CapacityLimiter(concurrency)
    errors: list[str] = []

    async def one(place: Path) -> None:
        options = ExecOptions(allowed_paths=(AllowedPath(path=str(place), read_only=False),))
        system_prompt = build_system_prompt(working_dir=str(place))
        async with limiter:
            runner = open_runner()
            try:
                config = Config(
                    provider=provider,
                    model=MODEL,
                    system_prompt=system_prompt,
                    runner=runner,
                    exec_options=options,
                )
                result = await logos.run(config, [], PROMPT)
                check = await runner.run(CHECK, options)
                if result.stop_reason != "final" or not check.ok:
                    errors.append(f"bare run: {result.stop_reason}, check exit {check.exit_code}")
            finally:
                await runner.aclose()

    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as group:
            for place in places:
                group.start_soon(one, place)
    finally:
        await provider.aclose()
    return time.perf_counter() - started, errors


def batch_env(home: Path, ray_path: str | None = None) -> dict[str, str]:
    """An environment of the benchmark's own: no user config, no provider variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    for name in ("home", "config", "state", "runtime"):
        (home / name).mkdir(exist_ok=True)
    env.update(
        HOME=str(home / "home"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_RUNTIME_DIR=str(home / "runtime"),
        OPENAI_API_KEY=API_KEY,
        PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(":"),
        RAY_USAGE_STATS_ENABLED="0",
    )
    if ray_path is not None:
        env["PATH"] = ray_path
    return env


async def measure(
    level: Level,
    plan: Plan,
    root: Path,
    model: WireModel,
    where_args: Sequence[str],
    open_runner: RunnerFactory,
    env: dict[str, str],
) -> Level:
    """The level's tasks in `plan.batch_rounds` rounds, each a batch and its baseline, in
    turn first (WHY: the machine's load drifts, and container starts vary most with it)."""
    concurrency = RAY_WORKERS if level.where == "ray" else level.workers
    for number, tasks in enumerate(split(level.tasks, plan.batch_rounds)):
        directory = Path(tempfile.mkdtemp(prefix=f"{level.where}{level.workers}-", dir=root))
        task_file = write_task_file(directory, tasks)
        batch = partial(
            anyio.to_thread.run_sync, run_batch_command, level, task_file, where_args, model, env
        )
        bare = partial(
            _bare_round, level, tasks, concurrency, model, directory / "bare", open_runner
        )
        before = level.elapsed_s, level.baseline_s
        for step in (batch, bare) if number % 2 == 0 else (bare, batch):
            await step()
        batch_s, bare_s = level.elapsed_s - before[0], level.baseline_s - before[1]
        level.round_overheads_s.append((batch_s - bare_s) / tasks)
    return level


async def _bare_round(
    level: Level,
    tasks: int,
    concurrency: int,
    model: WireModel,
    workspace: Path,
    open_runner: RunnerFactory,
) -> None:
    elapsed_s, errors = await bare_runs(tasks, concurrency, model, workspace, open_runner)
    level.baseline_s += elapsed_s
    level.errors.extend(errors)


def split(total: int, rounds: int) -> list[int]:
    """`total` tasks in `rounds` nearly equal rounds (none empty)."""
    rounds = max(1, min(rounds, total))
    return [total // rounds + (1 if n < total % rounds else 0) for n in range(rounds)]


async def run(plan: Plan) -> Section:
    levels: list[Level] = []
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="lbb", dir="/tmp")))
    try:
        with WireModel() as model:
            env = batch_env(root)
            for workers in plan.batch_workers:
                level = Level("local", workers, plan.batch_tasks)
                args = ("--yes", "--workers", str(workers))
                levels.append(await measure(level, plan, root, model, args, LocalRunner, env))
            levels += await _sandbox_levels(plan, root, model, env)
            levels.append(await _ray_level(plan, root, model))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return _section(plan, levels)


async def _sandbox_levels(
    plan: Plan, root: Path, model: WireModel, env: dict[str, str]
) -> list[Level]:
    check_image(plan.image)
    most = max(plan.batch_sandbox_workers)
    caps = f"max_sessions = {2 * most}\nmax_sessions_per_caller = {2 * most}\n"
    # WHY a pooled daemon too: each task mounts a workspace copy of its own, a spec the pool
    # sees once; this row shows what the pool does (and costs) for such a batch.
    runs: list[tuple[str, str, tuple[str, ...], Sequence[int]]] = [
        ("sandbox", caps, (), plan.batch_sandbox_workers),
        (SANDBOX_PREPARED, caps, ("--prepare", PREPARE), (most,)),
        (SANDBOX_POOLED, f"{caps}[pool]\nsize = {most}\n", (), plan.batch_sandbox_workers),
    ]
    levels = []
    for where, config, extra, worker_counts in runs:
        with running_daemon(plan.image, config) as daemon:
            socket = str(daemon.socket)
            for workers in worker_counts:
                level = Level(where, workers, plan.batch_sandbox_tasks)
                args = ("--sandbox", "--socket", socket, "--workers", str(workers), *extra)
                levels.append(
                    await measure(
                        level,
                        plan,
                        root,
                        model,
                        args,
                        functools.partial(SandboxRunner, socket),
                        env,
                    )
                )
    return levels


async def _ray_level(plan: Plan, root: Path, model: WireModel) -> Level:
    level = Level("ray", RAY_WORKERS, plan.batch_tasks)
    ray_dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    try:
        with ray_cluster(ray_dir) as cluster:
            env = batch_env(root, cluster.env["PATH"])
            args = ("--yes", "--ray", cluster.address)
            return await measure(level, plan, root, model, args, LocalRunner, env)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def _section(plan: Plan, levels: list[Level]) -> Section:
    rows = []
    problems = []
    targets = []
    for level in levels:
        rows.append(
            (
                level.label,
                f"{level.passed}/{level.tasks}",
                f"{len(level.errors)}" if not level.errors else f"{len(level.errors)} !!",
                f"{level.elapsed_s:.2f} s",
                f"{level.tasks_per_s:.1f}",
                f"{level.baseline_s:.2f} s",
                ms(level.overhead_s),
                mib(level.peak_rss_bytes),
                " / ".join(str(count) for count in sorted(level.nodes.values(), reverse=True)),
            )
        )
        if level.errors:
            problems.append(
                f"{len(level.errors)} failures in {level.label} (must be 0), e.g. {level.errors[0]}"
            )
        if level.where in ("local", "sandbox") and level.workers == 1:
            overhead_ms = level.overhead_s * 1000
            targets.append(
                Target(
                    f"{level.label}: harness overhead ≤ {TARGET_OVERHEAD_MS:g} ms/task",
                    ms(level.overhead_s),
                    overhead_ms <= TARGET_OVERHEAD_MS and not level.errors,
                )
            )
        if level.where in ("sandbox", SANDBOX_POOLED) and level.workers == max(
            plan.batch_sandbox_workers
        ):
            targets.append(
                Target(
                    f"{level.label}: ≥ {TARGET_SANDBOX_TASKS_PER_S:g} tasks/s",
                    f"{level.tasks_per_s:.1f}",
                    level.tasks_per_s >= TARGET_SANDBOX_TASKS_PER_S and not level.errors,
                )
            )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "where",
            "passed",
            "errors",
            "elapsed",
            "tasks/s",
            "without harness",
            "overhead/task",
            "peak RSS",
            "tasks per node",
        ),
        rows=tuple(rows),
        targets=tuple(targets),
        notes=(
            "overhead/task = (elapsed - the same runs without the harness, at the same "
            "concurrency, a fresh runner each) / tasks, the median of the rounds': workspace "
            "copies, trajectories, results lines, summary; a sandbox session's start is in both "
            "sides",
            f"Ray: a head and a second node on this machine, 1 CPU each; its baseline runs "
            f"{RAY_WORKERS} at a time in one process; peak RSS is the driver's only",
            f"{plan.batch_tasks} tasks locally and on Ray, {plan.batch_sandbox_tasks} with the "
            f"sandbox (each a new container), in {plan.batch_rounds} rounds of a batch and its "
            "baseline, in turn first",
            f"prepared session: `--prepare {PREPARE!r}` once per batch; each task's session a "
            "fork of it, its workspace mounted; its baseline starts fresh sessions",
        ),
        problems=tuple(problems),
        raw={
            "levels": [
                {
                    "where": level.where,
                    "workers": level.workers,
                    "tasks": level.tasks,
                    "passed": level.passed,
                    "elapsed_s": level.elapsed_s,
                    "process_s": level.process_s,
                    "baseline_s": level.baseline_s,
                    "overhead_per_task_s": level.overhead_s,
                    "round_overheads_s": level.round_overheads_s,
                    "tasks_per_s": level.tasks_per_s,
                    "peak_rss_bytes": level.peak_rss_bytes,
                    "tasks_per_node": level.nodes,
                    "errors": level.errors,
                }
                for level in levels
            ]
        },
    )
