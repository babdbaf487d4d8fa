"""The batch in figures: the success rate with its 95% confidence interval, spend and time.

The interval is Wilson's score interval: unlike the plain "p ± 1.96·sqrt(p(1-p)/n)", it stays
within 0 to 1 and means something for small batches and rates near 0 or 1 (3 of 3 passing gives
44% to 100%, not 100% to 100%). Every judged task counts: an `error` is a failure.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from logos.batch.results import TaskResult
from logos.providers.base import Usage

_SUMMARY_NAME = "summary.json"
_Z_95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


def wilson_interval(successes: int, trials: int, z: float = _Z_95) -> tuple[float, float]:
    """The score interval of a success rate; (0, 1) when nothing was judged."""
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


class BatchSummary(BaseModel):
    """Where every task of the task file stands (its latest run), in figures."""

    model_config = ConfigDict(frozen=True)

    tasks: int
    """Valid tasks in the task file."""
    bad_lines: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    canceled: int = 0
    not_run: int = 0
    success_rate: float | None = None
    """Passed over judged (passed, failed, error); None when none was judged."""
    success_ci95: tuple[float, float] | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    """What the runs with a known cost spent."""
    cost_unknown: int = 0
    """Runs whose cost is unknown (a model without a price)."""
    task_time_s: float = 0.0
    """The tasks' wall times added up."""
    elapsed_s: float = 0.0
    """This invocation of the batch, start to end."""
    stop_reasons: dict[str, int] = Field(default_factory=dict)

    @property
    def judged(self) -> int:
        return self.passed + self.failed + self.errors


def summarize(
    task_ids: Iterable[str],
    latest: dict[str, TaskResult],
    *,
    bad_lines: int,
    elapsed_s: float,
) -> BatchSummary:
    """The summary of the tasks `task_ids`, from each one's latest result."""
    ids = list(task_ids)
    results = [latest[task_id] for task_id in ids if task_id in latest]
    statuses = Counter(result.status for result in results)
    usage = Usage()
    for result in results:
        usage = usage + result.usage
    judged = statuses["passed"] + statuses["failed"] + statuses["error"]
    return BatchSummary(
        tasks=len(ids),
        bad_lines=bad_lines,
        passed=statuses["passed"],
        failed=statuses["failed"],
        errors=statuses["error"],
        canceled=statuses["canceled"],
        not_run=len(ids) - len(results),
        success_rate=statuses["passed"] / judged if judged else None,
        success_ci95=wilson_interval(statuses["passed"], judged) if judged else None,
        usage=usage,
        cost_usd=sum(r.cost_usd for r in results if r.cost_usd is not None),
        cost_unknown=sum(1 for r in results if r.cost_usd is None and r.stop_reason is not None),
        task_time_s=sum(r.wall_s for r in results),
        elapsed_s=elapsed_s,
        stop_reasons=dict(Counter(r.stop_reason or "not started" for r in results)),
    )


def write_summary(out: Path, summary: BatchSummary) -> Path:
    """`summary.json` in `out`, replaced whole (written aside, then renamed)."""
    path = out / _SUMMARY_NAME
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
    partial.replace(path)
    return path


def describe(summary: BatchSummary) -> list[str]:
    """The summary as lines for people."""
    lines = []
    if summary.success_rate is not None and summary.success_ci95 is not None:
        low, high = summary.success_ci95
        lines.append(
            f"success {summary.passed}/{summary.judged} = {summary.success_rate:.1%} "
            f"(95% CI {low:.1%} to {high:.1%})"
        )
    else:
        lines.append("no task was judged yet")
    counts = (
        f"{summary.passed} passed · {summary.failed} failed · {summary.errors} errors · "
        f"{summary.canceled} canceled · {summary.not_run} not run, of {summary.tasks} tasks"
    )
    if summary.bad_lines:
        counts += f" (+{summary.bad_lines} bad lines skipped)"
    lines.append(counts)
    cost = f"${summary.cost_usd:.4f}"
    if summary.cost_unknown:
        cost += f" (+{summary.cost_unknown} runs of unknown cost)"
    usage = summary.usage
    lines.append(
        f"cost {cost} · tokens {usage.total_input_tokens:,} in, {usage.output_tokens:,} out · "
        f"task time {summary.task_time_s:.1f} s · elapsed {summary.elapsed_s:.1f} s"
    )
    if summary.stop_reasons:
        reasons = ", ".join(
            f"{reason} {count}" for reason, count in sorted(summary.stop_reasons.items())
        )
        lines.append(f"stop reasons: {reasons}")
    return lines
