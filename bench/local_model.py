"""Family: the default local model on this machine, and the other small models it was
chosen among: load time, time to the first token and tokens/s, cold and warm, and the peak
memory of a whole `logos` run.

* **cold**: the page cache dropped first (`/proc/sys/vm/drop_caches`, as root), so the
  model is read from disk, as on a first run after a reboot; **warm**: right after, with the
  file in the page cache, as on every later run. Each is a fresh process
  (`bench.model_probe`), which loads the model as `logos --gguf` does.
* **a run**: the real `logos --gguf MODEL --yes --json "How many files are in this
  directory?"` in an empty directory, cold and warm: its wall time to the model's first
  output (the first `delta` or `command_start` event, Python's start and the load
  included), its whole wall time, and its peak resident memory (the kernel's `ru_maxrss` of
  that process, llama.cpp included).

Target: the default model decodes at 10 tokens/s or more: the bar the default was chosen
by (issue: a newcomer's 2-core laptop).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.child import child_report
from bench.daemon import BenchSetupError
from bench.plan import Plan
from bench.results import Section, Target, mib
from bench.small_model import MAIN_MODEL, MODELS, MODELS_DIR, SmallModel

FAMILY = "localmodel"
TITLE = "local models in process: load, first token, tokens/s, a run's peak memory"
TARGET_TOKENS_PER_S = 10.0
RUN_TASK = "How many files are in this directory?"
RUN_TIMEOUT_S = 600.0
DROP_CACHES = Path("/proc/sys/vm/drop_caches")


@dataclass(frozen=True)
class Probe:
    load_s: float
    ttft_s: float
    decode_tokens_per_s: float
    prompt_tokens: int


@dataclass(frozen=True)
class RunFigures:
    first_output_s: float
    wall_s: float
    peak_rss_bytes: int
    stop_reason: str


async def run(plan: Plan) -> Section:
    return await anyio.to_thread.run_sync(_run_sync, plan)


def _run_sync(plan: Plan) -> Section:
    models = [m for m in MODELS if m.name in plan.local_models]
    rows: list[tuple[str, ...]] = []
    raw: dict[str, object] = {}
    problems: list[str] = []
    targets: list[Target] = []
    can_drop = _can_drop_caches()
    for model in models:
        path = MODELS_DIR / model.file
        if not path.is_file():
            problems.append(
                f"model {model.name} is not in {MODELS_DIR}: run scripts/fetch-model {model.name}"
            )
            continue
        try:
            figures = _measure(model, path, can_drop)
        except (BenchSetupError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
            problems.append(f"{model.label}: {exc}")
            continue
        cold, warm, cold_run, warm_run = figures
        raw[model.name] = {
            "size_bytes": path.stat().st_size,
            "cold": cold.__dict__,
            "warm": warm.__dict__,
            "run_cold": cold_run.__dict__,
            "run_warm": warm_run.__dict__,
        }
        rows.append(
            (
                model.label + (" (default)" if model == MAIN_MODEL else ""),
                f"{path.stat().st_size / 1e6:.0f} MB",
                f"{cold.load_s:.2f} s",
                f"{warm.load_s:.2f} s",
                f"{warm.ttft_s:.2f} s",
                f"{warm.decode_tokens_per_s:.1f}",
                f"{cold_run.first_output_s:.1f} s",
                f"{warm_run.first_output_s:.1f} s",
                f"{warm_run.wall_s:.1f} s",
                mib(max(cold_run.peak_rss_bytes, warm_run.peak_rss_bytes)),
            )
        )
        if model == MAIN_MODEL:
            targets.append(
                Target(
                    f"default model ({model.label}) decodes >= {TARGET_TOKENS_PER_S:.0f} tokens/s",
                    f"{warm.decode_tokens_per_s:.1f} tokens/s",
                    warm.decode_tokens_per_s >= TARGET_TOKENS_PER_S,
                )
            )
    prompt_tokens = ", ".join(
        f"{name} {figures['warm']['prompt_tokens']}"
        for name, figures in raw.items()
        if isinstance(figures, dict)
    )
    notes = [
        "first token: the compact prompt, its worked example and a task, read afresh each "
        f"time (tokens: {prompt_tokens}); tokens/s: llama.cpp's decode rate over 128 tokens; "
        "threads: llama.cpp's choice for this machine",
        "run: logos --gguf MODEL --yes --json, one task in an empty directory; first output = "
        "the first delta or command_start event after the process started",
    ]
    if not can_drop:
        notes.append(
            "cold figures are NOT cold: the page cache cannot be dropped here (needs root); "
            "they are a second warm sample"
        )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "model",
            "size",
            "load cold",
            "load warm",
            "first token",
            "tokens/s",
            "run: first output cold",
            "warm",
            "run wall",
            "run peak RSS",
        ),
        rows=tuple(rows),
        targets=tuple(targets),
        notes=tuple(notes),
        problems=tuple(problems),
        raw=raw,
    )


def _measure(
    model: SmallModel, path: Path, can_drop: bool
) -> tuple[Probe, Probe, RunFigures, RunFigures]:
    _drop_caches(can_drop)
    cold = _probe(path)
    warm = _probe(path)
    _drop_caches(can_drop)
    cold_run = _logos_run(path)
    warm_run = _logos_run(path)
    return cold, warm, cold_run, warm_run


def _probe(path: Path) -> Probe:
    return Probe(**child_report("bench.model_probe", str(path), timeout_s=RUN_TIMEOUT_S))


def _logos_run(path: Path) -> RunFigures:
    """The real command; its peak RSS from the kernel (`ru_maxrss` through wait4)."""
    with tempfile.TemporaryDirectory(prefix="bench-localmodel-") as scratch:
        work = Path(scratch) / "work"
        work.mkdir()
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(Path(scratch) / "config"),
            "XDG_STATE_HOME": str(Path(scratch) / "state"),
            "XDG_DATA_HOME": str(Path(scratch) / "data"),
        }
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "logos", "--gguf", str(path), "--yes", "--json", RUN_TASK],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdout is not None
        first_output = float("nan")
        stop_reason = "?"
        for line in process.stdout:
            event = json.loads(line)
            if first_output != first_output and event["type"] in ("delta", "command_start"):
                first_output = time.perf_counter() - started
            if event["type"] == "done":
                stop_reason = str(event["stop_reason"])
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        # WHY KiB: Linux reports ru_maxrss in kilobytes.
        return RunFigures(first_output, wall, usage.ru_maxrss * 1024, stop_reason)


def _can_drop_caches() -> bool:
    return os.access(DROP_CACHES, os.W_OK)


def _drop_caches(can_drop: bool) -> None:
    if can_drop:
        os.sync()
        DROP_CACHES.write_text("3\n")
