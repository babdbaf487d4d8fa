"""Family: small local models on the small-task suite (`bench.small_tasks`).

Each try is what a user gets: the real `logos` command, in its own process, with its default
flags (plus `--yes`: nobody is at a terminal to confirm), against llama.cpp's own server
loaded with the model, in a fresh directory laid out by the task. A try is **done** when the
task's check passes on what the run left (the final answer, the directory) **and** the
run's trajectory shows that a command really ran; a right outcome without any command is a
**right guess**, not done. Every other try gets one failure class.

Rows, per model found in `.cache/models/` (`scripts/fetch-model NAME`):

* `logos` with its defaults, `small_model_tries` times per task;
* for the main model, an ablation once per task: the full prompt, no grammar, llama.cpp's
  own sampling (`--no-grammar --prompt-style full --temperature 0.8`), i.e. the defaults a
  llama.cpp model had before the small-model ones;
* for the main model, mini-swe-agent once per task, in both of its configurations
  (`bench.mini_small`), on the same server.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import httpx

from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target
from bench.small_tasks import TASKS, SmallTask
from logos.errors import LocalModelError
from logos.models.llama_server import LocalModelServer

FAMILY = "smallmodel"
TITLE = "small local models: simple shell tasks done, by default (bench/small_tasks.py)"
REPO = Path(__file__).resolve().parent.parent
MODELS_DIR = REPO / ".cache" / "models"
TRY_TIME_S = 180.0
"""`--max-time` of a try: a small model that loops is stopped, and counted."""
PROCESS_GRACE_S = 60.0
CONTEXT = 8192
TARGET_DONE = 0.70

DONE = "done"
RIGHT_GUESS = "right guess"
NO_COMMAND = "no command"
MALFORMED = "malformed block"
LOOP_LIMIT = "loop limit"
TIME_LIMIT = "time limit"
WRONG = "wrong outcome"
ERROR = "error"


@dataclass(frozen=True)
class SmallModel:
    name: str
    """As `scripts/fetch-model` knows it."""
    file: str
    label: str


MODELS = (
    SmallModel(
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    ),
    SmallModel(
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
    ),
    SmallModel("gemma3-270m", "gemma-3-270m-q4_k_m.gguf", "Gemma 3 270M Q4_K_M"),
    SmallModel("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct Q4_1"),
)
MAIN_MODEL = MODELS[0]
"""The 0.5B model the target is measured on."""
ABLATION_ARGS = ("--no-grammar", "--prompt-style", "full", "--temperature", "0.8")
MINI_CONFIGS = ("mini.yaml", "mini_textbased.yaml")
ASKED_ONCE = "same model, files pasted, asked once"
PASTED_SYSTEM = "You are a helpful assistant."
PASTED_CHARS = 4000
"""Of each file pasted into the asked-once baseline's question."""


class SuiteTask(Protocol):
    """What a try needs of a task: the small-task suite's, or the first-question suite's
    (`bench.repo_questions`)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def prompt(self) -> str: ...
    def lay_out(self, workspace: Path) -> None: ...
    def check(self, workspace: Path, answer: str) -> bool: ...


Task = TypeVar("Task", bound=SuiteTask)
Tried = TypeVar("Tried")


@dataclass(frozen=True)
class TryOutcome:
    task: str
    kind: str
    outcome: str
    """DONE, RIGHT_GUESS or a failure class."""
    commands: int
    """Commands that really ran (a refused or unapproved one does not count)."""
    turns: int
    tokens: int
    wall_s: float
    answer: str
    detail: str = ""

    @property
    def done(self) -> bool:
        return self.outcome == DONE


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible llama.cpp server: its `/v1` URL and key."""

    base_url: str
    api_key: str


@dataclass
class Row:
    label: str
    model: str
    tries: list[TryOutcome] = field(default_factory=list)

    @property
    def done(self) -> int:
        return sum(t.done for t in self.tries)

    @property
    def done_share(self) -> float:
        return self.done / len(self.tries) if self.tries else math.nan

    def failures(self) -> Counter[str]:
        return Counter(t.outcome for t in self.tries if t.outcome not in (DONE, RIGHT_GUESS))

    def median(self, attribute: str) -> float:
        values = [float(getattr(t, attribute)) for t in self.tries]
        return statistics.median(values) if values else math.nan

    def cells(self) -> tuple[str, ...]:
        guesses = sum(t.outcome == RIGHT_GUESS for t in self.tries)
        failures = ", ".join(f"{name} {count}" for name, count in self.failures().most_common())
        return (
            self.label,
            self.model,
            f"{self.done}/{len(self.tries)}",
            f"{self.done_share:.0%}",
            str(guesses),
            f"{self.median('wall_s'):.1f} s",
            f"{self.median('turns'):.0f}",
            f"{self.median('tokens'):.0f}",
            failures or "-",
        )


def classify(stop_reason: object, commands: int, right: bool) -> str:
    """A try's outcome from how the run stopped, whether a command ran, and the check."""
    if right:
        return DONE if commands else RIGHT_GUESS
    if stop_reason == "hallucination_limit":
        return MALFORMED
    if stop_reason == "max_steps":
        return LOOP_LIMIT
    if stop_reason == "max_wall_time":
        return TIME_LIMIT
    if stop_reason != "final":
        return ERROR
    return WRONG if commands else NO_COMMAND


def run_logos_try(
    task: SuiteTask,
    endpoint: Endpoint,
    extra_args: Sequence[str] = (),
    environ: dict[str, str] | None = None,
) -> TryOutcome:
    """One try of `task` through the `logos` command, in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix=f"small-{task.id}-") as scratch:
        workspace = Path(scratch) / "work"
        workspace.mkdir()
        task.lay_out(workspace)
        trajectory = Path(scratch) / "run.jsonl"
        argv = [
            *(sys.executable, "-m", "logos"),
            *("--base-url", endpoint.base_url, "--yes", "--json"),
            *("--max-time", str(TRY_TIME_S), "--trajectory", str(trajectory)),
            *extra_args,
            task.prompt,
        ]
        env = {
            **(environ if environ is not None else os.environ),
            "OPENAI_API_KEY": endpoint.api_key,
            # The user's memory notes and config must not steer the suite.
            "XDG_CONFIG_HOME": str(Path(scratch) / "config"),
            "XDG_DATA_HOME": str(Path(scratch) / "data"),
            "XDG_STATE_HOME": str(Path(scratch) / "state"),
        }
        ran = _run_try(argv, workspace, env)
        if ran is None:
            return _hung(task)
        completed, wall = ran
        summary = _done_event(completed.stdout)
        commands = _commands_that_ran(trajectory)
        answer = str(summary.get("response", ""))
        usage = summary.get("usage") or {}
        detail = str(summary.get("error") or "")
        if not summary:
            detail = completed.stderr.decode(errors="replace")[-400:]
        return TryOutcome(
            task=task.id,
            kind=task.kind,
            outcome=classify(summary.get("stop_reason"), commands, task.check(workspace, answer)),
            commands=commands,
            turns=int(summary.get("turns", 0)),
            tokens=int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0)),
            wall_s=wall,
            answer=answer,
            detail=detail,
        )


def ask_once(task: SmallTask, endpoint: Endpoint) -> TryOutcome:
    """The floor: one request, the task's files pasted above it; no command runs, so only a
    question's answer can be right (a task that changes files cannot be done)."""
    with tempfile.TemporaryDirectory(prefix=f"small-once-{task.id}-") as scratch:
        workspace = Path(scratch)
        task.lay_out(workspace)
        files = "".join(
            f"--- {name} ---\n{content[:PASTED_CHARS]}\n" for name, content in task.files.items()
        )
        pasted = f"The files in this directory:\n\n{files}\n" if files else ""
        return asked_once(task, endpoint, workspace, f"{pasted}{task.prompt}", TRY_TIME_S)


def asked_once(
    task: SuiteTask, endpoint: Endpoint, workspace: Path, content: str, timeout_s: float
) -> TryOutcome:
    """One request holding `content` (what was pasted, then the task), no command run; the
    answer judged by the task's check in `workspace`."""
    started = time.perf_counter()
    response = httpx.post(
        f"{endpoint.base_url}/chat/completions",
        headers={"authorization": f"Bearer {endpoint.api_key}"},
        json={
            "messages": [
                {"role": "system", "content": PASTED_SYSTEM},
                {"role": "user", "content": content},
            ],
            "temperature": 0.0,
            "max_tokens": 1024,
        },
        timeout=timeout_s,
    )
    wall = time.perf_counter() - started
    body = response.json()
    answer = str(body["choices"][0]["message"]["content"])
    usage = body.get("usage") or {}
    right = task.check(workspace, answer)
    return TryOutcome(
        task=task.id,
        kind=task.kind,
        outcome=RIGHT_GUESS if right else WRONG,
        commands=0,
        turns=1,
        tokens=int(usage.get("total_tokens", 0)),
        wall_s=wall,
        answer=answer,
    )


def run_mini_try(
    task: SuiteTask, endpoint: Endpoint, config: str, time_limit_s: float = TRY_TIME_S
) -> TryOutcome:
    """One try of `task` with mini-swe-agent (`bench.mini_small`), in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix=f"small-mini-{task.id}-") as scratch:
        workspace = Path(scratch)
        task.lay_out(workspace)
        argv = [
            *(sys.executable, "-m", "bench.mini_small", "--config", config),
            *("--base-url", endpoint.base_url, "--api-key", endpoint.api_key),
            *("--workspace", str(workspace), "--time-limit", str(int(time_limit_s))),
            task.prompt,
        ]
        ran = _run_try(argv, REPO)
        if ran is None:
            return _hung(task)
        completed, wall = ran
        lines = completed.stdout.decode(errors="replace").strip().splitlines()
        try:
            summary: dict[str, Any] = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            summary = {}
        status = str(summary.get("exit_status", ""))
        answer = str(summary.get("answer", ""))
        commands = int(summary.get("commands", 0))
        right = task.check(workspace, answer)
        stop = {
            "Submitted": "final",
            "LimitsExceeded": "max_steps",
            "TimeExceeded": "max_wall_time",
            "RepeatedFormatError": "hallucination_limit",
        }.get(status, "error")
        return TryOutcome(
            task=task.id,
            kind=task.kind,
            outcome=classify(stop, commands, right),
            commands=commands,
            turns=int(summary.get("calls", 0)),
            tokens=int(summary.get("tokens", 0)),
            wall_s=wall,
            answer=answer,
            detail=status or completed.stderr.decode(errors="replace")[-400:],
        )


def _run_try(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[bytes], float] | None:
    """Run one try's process to its end: what it printed and its wall time; None when it
    outlived the try's time limit (it hung)."""
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TRY_TIME_S + PROCESS_GRACE_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    return completed, time.perf_counter() - started


def _hung(task: SuiteTask) -> TryOutcome:
    return TryOutcome(task.id, task.kind, TIME_LIMIT, 0, 0, 0, TRY_TIME_S, "", "hung")


def _done_event(stdout: bytes) -> dict[str, Any]:
    """The `done` event of a `--json` run ({} when there is none)."""
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("type") == "done":
            return event
    return {}


def _commands_that_ran(trajectory: Path) -> int:
    """Commands of the run that really ran, from its trajectory: results with no runner
    error (a refused or unapproved command has one)."""
    try:
        lines = trajectory.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    ran = 0
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            isinstance(record, dict)
            and record.get("type") == "step"
            and record.get("role") == "result"
        ):
            ran += sum(1 for result in record.get("results") or () if result.get("error") is None)
    return ran


def run_row(
    label: str,
    model: SmallModel,
    tries: int,
    tasks: Sequence[SmallTask],
    one_try: Callable[[SmallTask], TryOutcome],
) -> Row:
    return Row(label, model.label, in_rounds(label, tries, tasks, one_try, lambda o: o.outcome))


def in_rounds(
    label: str,
    tries: int,
    tasks: Sequence[Task],
    one_try: Callable[[Task], Tried],
    status: Callable[[Tried], str],
) -> list[Tried]:
    """`tries` rounds over `tasks`, in task order within each round; each try's status is
    printed as it ends (a suite takes an hour)."""
    tried = []
    for round_number in range(tries):
        for task in tasks:
            outcome = one_try(task)
            tried.append(outcome)
            _progress(f"{label} [{round_number + 1}/{tries}] {task.id}: {status(outcome)}")
    return tried


async def run(plan: Plan) -> Section:
    return await anyio.to_thread.run_sync(_run_sync, plan)


def _run_sync(plan: Plan) -> Section:
    tasks = TASKS[: plan.small_model_tasks] if plan.small_model_tasks else TASKS
    found = [m for m in MODELS if m.name in plan.small_models and (MODELS_DIR / m.file).is_file()]
    missing = [name for name in plan.small_models if name not in {m.name for m in found}]
    problems = [
        f"model {name} is not in {MODELS_DIR}: run scripts/fetch-model {name}" for name in missing
    ]
    rows: list[Row] = []
    for model in found:
        try:
            with LocalModelServer(MODELS_DIR / model.file, n_ctx=CONTEXT) as server:
                endpoint = Endpoint(server.openai_base_url, server.api_key)
                rows.append(
                    run_row(
                        "logos (defaults)",
                        model,
                        plan.small_model_tries
                        if model == MAIN_MODEL
                        else plan.small_model_other_tries,
                        tasks,
                        partial(run_logos_try, endpoint=endpoint),
                    )
                )
                if model != MAIN_MODEL or not plan.small_model_baselines:
                    continue
                rows.append(
                    run_row(
                        "logos, no small-model defaults",
                        model,
                        1,
                        tasks,
                        partial(run_logos_try, endpoint=endpoint, extra_args=ABLATION_ARGS),
                    )
                )
                for config in MINI_CONFIGS:
                    rows.append(
                        run_row(
                            f"mini-swe-agent ({config})",
                            model,
                            1,
                            tasks,
                            partial(run_mini_try, endpoint=endpoint, config=config),
                        )
                    )
                rows.append(
                    run_row(ASKED_ONCE, model, 1, tasks, partial(ask_once, endpoint=endpoint))
                )
        except LocalModelError as exc:
            problems.append(f"{model.label} could not be served: {exc}")
    return _section(rows, tasks, problems)


def _section(rows: Sequence[Row], tasks: Sequence[SmallTask], problems: Sequence[str]) -> Section:
    targets = []
    main = next(
        (r for r in rows if r.model == MAIN_MODEL.label and r.label == "logos (defaults)"), None
    )
    if main is not None and len(tasks) == len(TASKS):
        targets.append(
            Target(
                f"{MAIN_MODEL.label}: >= {TARGET_DONE:.0%} of tries done, by default",
                f"{main.done_share:.0%} ({main.done}/{len(main.tries)})",
                main.done_share >= TARGET_DONE,
            )
        )
        once = next((r for r in rows if r.label == ASKED_ONCE), None)
        if once is not None:
            right = sum(t.outcome == RIGHT_GUESS for t in once.tries) / len(once.tries)
            targets.append(
                Target(
                    f"{MAIN_MODEL.label}: logos ahead of the same model asked once",
                    f"{main.done_share:.0%} vs {right:.0%} right",
                    main.done_share > right,
                )
            )
        minis = [r for r in rows if r.label.startswith("mini-swe-agent")]
        if minis:
            best = max(minis, key=lambda r: r.done_share)
            targets.append(
                Target(
                    f"{MAIN_MODEL.label}: logos ahead of mini-swe-agent's best configuration",
                    f"{main.done_share:.0%} vs {best.done_share:.0%} ({best.label})",
                    main.done_share > best.done_share,
                )
            )
    held_out = {task.id for task in tasks if task.held_out}
    kinds = sorted({task.kind for task in tasks})
    by_kind = {
        f"{row.label} / {row.model}": {
            kind: f"{sum(t.done for t in row.tries if t.kind == kind)}"
            f"/{sum(1 for t in row.tries if t.kind == kind)}"
            for kind in kinds
        }
        for row in rows
    }
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "agent",
            "model",
            "done",
            "share",
            "right guesses",
            "median wall",
            "turns",
            "tokens",
            "failures",
        ),
        rows=tuple(row.cells() for row in rows),
        groups=(
            SeriesGroup(
                "small tasks: wall time per try",
                tuple(
                    Series(f"{row.label}, {row.model}", tuple(t.wall_s for t in row.tries))
                    for row in rows
                ),
            ),
        )
        if rows
        else (),
        targets=tuple(targets),
        notes=(
            f"{len(tasks)} tasks (counting, finding, creating, copying, summing, editing "
            "without sed -i, two steps); done = the check passed AND the trajectory shows a "
            "command that ran; a right outcome without one is a right guess",
            "each try: the logos command in its own process, --yes --json, against llama.cpp "
            f"serving the model ({CONTEXT} tokens of context), a fresh directory; logos rows "
            "with their defaults; the ablation and mini-swe-agent once per task",
            f"held out ({len(held_out)} tasks written after the defaults were tuned on the "
            "others): "
            + "; ".join(
                f"{row.label} / {row.model} "
                f"{sum(t.done for t in row.tries if t.task in held_out)}"
                f"/{sum(1 for t in row.tries if t.task in held_out)}"
                for row in rows
            ),
            "done by kind: "
            + "; ".join(
                f"{name}: " + ", ".join(f"{k} {v}" for k, v in kinds_done.items())
                for name, kinds_done in by_kind.items()
            ),
        ),
        problems=tuple(problems),
        raw={
            "rows": [
                {"label": r.label, "model": r.model, "tries": [asdict(t) for t in r.tries]}
                for r in rows
            ]
        },
    )


def _progress(message: str) -> None:
    print(f"      {message}", file=sys.stderr, flush=True)
