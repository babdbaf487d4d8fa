"""Family: what a program's start costs, from its exec to its exit.

The `logos` and `sandboxd` commands a person types most, each started afresh as its console
script: the wall time and the CPU time of the whole process (on two cores the CPU is what
starts compete for: the test suite starts these programs about 450 times). Beside them, named
baselines: the interpreter alone, the libraries every logos command loads (httpx, pydantic,
anyio, rich: the floor no logos code can go under), the MCP SDK that `logos mcp` and
`sandboxd mcp` load on top, and a peer agent's command line (mini-swe-agent's `mini --help`).

Each command runs once first, unmeasured, so that its bytecode is cached as after any first
use (`start_warm_up`); then the commands take turns, `start_iterations` times, so that a busy
moment of the machine falls on all of them alike.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.daemon import BenchSetupError
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, ms
from bench.wire_model import API_KEY, MODEL, WireModel

FAMILY = "start"
TITLE = "Program start: the commands to their exit, beside the interpreter and the libraries"
LIBRARIES = "the libraries every logos command loads"
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class _Command:
    label: str
    argv: tuple[str, ...]
    baseline: bool = False


@dataclass(frozen=True)
class _Sample:
    wall_s: float
    cpu_s: float


async def run(plan: Plan) -> Section:
    return await anyio.to_thread.run_sync(_measure, plan.start_iterations, plan.start_warm_up)


def _measure(iterations: int, warm_up: bool) -> Section:
    with tempfile.TemporaryDirectory(prefix="logos-bench-start-") as root, WireModel() as model:
        env = _environment(Path(root), model.base_url)
        work = Path(root) / "work"
        work.mkdir()
        commands, problems = _commands()
        samples: dict[str, list[_Sample]] = {command.label: [] for command in commands}
        # WHY the task before `logos show RUN`: its first start saves the run shown.
        for round_number in range(iterations + warm_up):
            for command in commands:
                argv = _with_saved_run(command.argv, Path(root))
                sample = _start(argv, env, work)
                if round_number >= warm_up:
                    samples[command.label].append(sample)
        return _section(commands, samples, problems, iterations, warm_up)


def _commands() -> tuple[list[_Command], list[str]]:
    bin_dir = Path(sys.executable).parent
    python = sys.executable
    commands = [
        _Command("python -c pass (the interpreter)", (python, "-c", "pass"), baseline=True),
        _Command(
            f"import httpx, pydantic, anyio, rich ({LIBRARIES})",
            (python, "-c", "import httpx, pydantic, anyio, rich.console"),
            baseline=True,
        ),
        _Command("import mcp (the MCP SDK)", (python, "-c", "import mcp"), baseline=True),
    ]
    problems = []
    mini = shutil.which("mini", path=str(bin_dir))
    if mini is None:
        problems.append("mini-swe-agent's `mini` is not installed: pip install -e '.[bench]'")
    else:
        commands.append(_Command("mini --help (mini-swe-agent)", (mini, "--help"), True))
    logos, sandboxd = str(bin_dir / "logos"), str(bin_dir / "sandboxd")
    commands += [
        _Command("logos --version", (logos, "--version")),
        _Command("logos --help", (logos, "--help")),
        _Command("logos memory list", (logos, "memory", "list")),
        _Command(
            "logos TASK (two turns, a local OpenAI-compatible server)",
            (logos, "--model", MODEL, "--yes", "run true, then say done"),
        ),
        _Command("logos show RUN", (logos, "show", "{saved run}")),
        _Command("sandboxd --help", (sandboxd, "--help")),
    ]
    return commands, problems


def _environment(root: Path, base_url: str) -> dict[str, str]:
    """A home of its own (no config file or memory of the person's), the wire model as the
    provider; bytecode may be written (the first, unmeasured start caches it)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONDONTWRITEBYTECODE" and not key.startswith(("OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        HOME=str(root / "home"),
        XDG_STATE_HOME=str(root / "state"),
        XDG_CONFIG_HOME=str(root / "config"),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY=API_KEY,
    )
    return env


def _with_saved_run(argv: Sequence[str], root: Path) -> tuple[str, ...]:
    """`{saved run}` replaced by the trajectory the task's first start saved."""
    if "{saved run}" not in argv:
        return tuple(argv)
    runs = sorted((root / "state" / "logos" / "runs").glob("*.jsonl"))
    if not runs:
        raise BenchSetupError("the task's start saved no run for `logos show` to read")
    return tuple(str(runs[0]) if part == "{saved run}" else part for part in argv)


def _start(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> _Sample:
    """One start to its exit; the CPU time is its own (and its children's), from the
    kernel's accounting of reaped children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=_START_TIMEOUT_S,
        check=False,
    )
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise BenchSetupError(
            f"{' '.join(argv[:4])} failed with status {done.returncode}:\n"
            f"{done.stderr.strip()[-1500:]}"
        )
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return _Sample(wall_s, cpu_s)


def _section(
    commands: Sequence[_Command],
    samples: Mapping[str, Sequence[_Sample]],
    problems: Sequence[str],
    iterations: int,
    warm_up: bool,
) -> Section:
    def cpu(label: str) -> float:
        return statistics.median(sample.cpu_s for sample in samples[label])

    floor = next(command.label for command in commands if LIBRARIES in command.label)
    rows = []
    for command in commands:
        walls = [sample.wall_s for sample in samples[command.label]]
        beyond = "" if command.baseline else ms(cpu(command.label) - cpu(floor))
        rows.append(
            (
                command.label,
                ms(statistics.median(walls)),
                ms(cpu(command.label)),
                beyond,
            )
        )
    series = tuple(
        Series(command.label, tuple(sample.wall_s for sample in samples[command.label]))
        for command in commands
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("program", "wall (median)", "CPU (median)", f"CPU beyond {LIBRARIES}"),
        rows=tuple(rows),
        groups=(SeriesGroup("program start, exec to exit", series),),
        notes=(
            f"{iterations} start(s) of each, in turns"
            + (", after one unmeasured start each (bytecode cached)" if warm_up else "")
            + "; CPU is user + system time of the process and its children",
        ),
        problems=tuple(problems),
        raw={
            command.label: {
                "argv": list(command.argv),
                "wall_s": [sample.wall_s for sample in samples[command.label]],
                "cpu_s": [sample.cpu_s for sample in samples[command.label]],
            }
            for command in commands
        },
    )
