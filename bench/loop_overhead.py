"""Family 3a: what the agent loop itself costs per step, with the model and runner out of it.

A step is one model turn whose reply is a single `<cmd>true</cmd>` block, plus running it
and sending the `<result>` envelope back. The model is scripted and streams without pause;
the runner is either a no-op (so every remaining microsecond is the loop's own) or the real
LocalRunner (to show the total). Each step's runner time is measured and subtracted.
"""

from __future__ import annotations

import itertools
import statistics
import time

import logos
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target, ms
from bench.scripted_model import ScriptedModel
from logos.agent.config import Callbacks, Config
from logos.agent.steps import StepMessage
from logos.options import ExecOptions
from logos.result import Result
from logos.runners.base import Runner

FAMILY = "loop"
TITLE = "Agent loop overhead per step (scripted zero-latency model)"
TARGET_MS_PER_STEP = 1.0
STEP_REPLY = "Checking the tree before the next edit.\n<cmd>true</cmd>\n"
FINAL_REPLY = "All steps ran; nothing else to do."


class InstantRunner(Runner):
    """Reports success without running anything: isolates the loop from process costs."""

    async def run(self, command: str, options: ExecOptions) -> Result:
        return Result(command=command, exit_code=0)

    async def aclose(self) -> None:
        """Nothing runs, so nothing is left to close."""


class TimedRunner(Runner):
    """Wraps a runner and records how long each of its calls took."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.durations_s: list[float] = []

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.perf_counter()
        try:
            return await self.inner.run(command, options)
        finally:
            self.durations_s.append(time.perf_counter() - started)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _StepClock:
    """Marks the moment each result envelope is added: the end of a step."""

    def __init__(self) -> None:
        self.marks: list[float] = []

    def on_step_end(self, step: StepMessage) -> None:
        if step.role == "result":
            self.marks.append(time.perf_counter())


async def measure_steps(runner: Runner, steps: int) -> tuple[list[float], list[float]]:
    """One run of `steps` steps: each step's wall time and its runner time, in seconds."""
    timed = TimedRunner(runner)
    clock = _StepClock()
    config = Config(
        provider=ScriptedModel([STEP_REPLY] * steps + [FINAL_REPLY], chunk_chars=8),
        runner=timed,
        max_steps=steps + 1,
    )
    started = time.perf_counter()
    outcome = await logos.run(
        config, [], "Run the check.", Callbacks(on_step_end=clock.on_step_end)
    )
    if outcome.stop_reason != "final" or len(clock.marks) != steps:
        raise RuntimeError(
            f"the scripted run stopped with {outcome.stop_reason} after {len(clock.marks)} of "
            f"{steps} steps ({outcome.error}): the loop's stop rules changed; fix the script"
        )
    failed = [r for s in outcome.steps for r in s.results if not r.ok]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {steps} `true` commands failed in the loop benchmark, e.g. "
            f"{failed[0]}: check the runner"
        )
    ends = [started, *clock.marks]
    step_s = [end - begin for begin, end in itertools.pairwise(ends)]
    return step_s, timed.durations_s


async def run(plan: Plan) -> Section:
    rows: list[tuple[str, ...]] = []
    series: list[Series] = []
    targets: list[Target] = []
    raw: dict[str, object] = {}
    local = logos.LocalRunner()
    try:
        # WHY the target judges the no-op row only: it alone isolates the loop's own code;
        # the LocalRunner row shows what a real step costs in total.
        runners: list[tuple[str, Runner, bool]] = [
            ("no-op runner", InstantRunner(), True),
            ("LocalRunner", local, False),
        ]
        for label, runner, judged in runners:
            step_s: list[float] = []
            runner_s: list[float] = []
            for _ in range(plan.loop_runs):
                steps, calls = await measure_steps(runner, plan.loop_steps)
                step_s += steps
                runner_s += calls
            overhead_s = [s - r for s, r in zip(step_s, runner_s, strict=True)]
            mean_overhead = statistics.fmean(overhead_s)
            rows.append(
                (
                    label,
                    f"{len(step_s)}",
                    ms(statistics.median(step_s)),
                    ms(statistics.fmean(runner_s)),
                    ms(statistics.median(overhead_s)),
                    ms(mean_overhead),
                    ms(max(overhead_s)),
                )
            )
            series.append(Series(f"loop only ({label})", tuple(overhead_s)))
            raw[label] = {"step_s": step_s, "runner_s": runner_s}
            if judged:
                targets.append(
                    Target(
                        f"loop overhead < {TARGET_MS_PER_STEP:g} ms/step (mean, no-op runner)",
                        ms(mean_overhead),
                        mean_overhead * 1000 < TARGET_MS_PER_STEP,
                    )
                )
    finally:
        await local.aclose()
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "runner",
            "steps",
            "step median",
            "runner mean",
            "loop median",
            "loop mean",
            "loop max",
        ),
        rows=tuple(rows),
        groups=(SeriesGroup("Loop overhead per step (runner time subtracted)", tuple(series)),),
        targets=tuple(targets),
        notes=(
            f"{plan.loop_runs} run(s) of {plan.loop_steps} steps; the first step of each run "
            "includes building the system prompt",
        ),
        raw=raw,
    )
