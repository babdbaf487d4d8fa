"""What a benchmark family hands to the report: samples, a table, targets and problems."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Series:
    """One latency distribution: every sample, in seconds, in the order taken."""

    label: str
    samples_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return percentile(self.samples_s, 50)

    @property
    def p95_s(self) -> float:
        return percentile(self.samples_s, 95)


@dataclass(frozen=True)
class SeriesGroup:
    """Distributions drawn together in one panel of the chart."""

    title: str
    series: tuple[Series, ...]


@dataclass(frozen=True)
class Target:
    """A goal next to its measurement; `passed` is decided by the family, never fudged."""

    goal: str
    measured: str
    passed: bool


@dataclass(frozen=True)
class Section:
    """One family's outcome: its own table (already formatted), and the raw figures."""

    family: str
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    groups: tuple[SeriesGroup, ...] = ()
    targets: tuple[Target, ...] = ()
    notes: tuple[str, ...] = ()
    """Context a reader needs to interpret the table (how it was measured)."""
    problems: tuple[str, ...] = ()
    """Things that went wrong (failed commands, a method that could not run): never hidden."""
    raw: Mapping[str, Any] = field(default_factory=dict)
    """Extra figures for the JSON file, beyond the samples in `groups`."""


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (NaN if empty)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ms(seconds: float) -> str:
    """Seconds as milliseconds, about three significant digits ("0.131 ms", "231 ms")."""
    if math.isnan(seconds):
        return "n/a"
    value = seconds * 1000
    # WHY the magnitude: a difference of two timings (an overhead) can come out negative.
    if abs(value) >= 100:
        return f"{value:.0f} ms"
    if abs(value) >= 10:
        return f"{value:.1f} ms"
    if abs(value) >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def mib(size_bytes: float) -> str:
    return f"{size_bytes / 2**20:.1f} MiB"


def ratio(value: float, baseline: float) -> str:
    """`value / baseline` as "0.12x"; "n/a" when either side is missing."""
    if math.isnan(value) or math.isnan(baseline) or baseline <= 0:
        return "n/a"
    return f"{value / baseline:.2f}x"


MEASURE_HEADERS = ("measure", "n", "median", "p95", "result")
"""The headers of a table of `measure_row`s."""


def measure_row(measure: str, samples: Sequence[float], result: str = "") -> tuple[str, ...]:
    """A table row for one measure's samples: measure, n, median, p95 (n/a without samples),
    and what the family says of the result."""
    if not samples:
        return (measure, "0", "n/a", "n/a", result)
    return (
        measure,
        str(len(samples)),
        ms(percentile(samples, 50)),
        ms(percentile(samples, 95)),
        result,
    )


def series_row(figure: str, series: Series, versus: str) -> tuple[str, ...]:
    """A table row for `series`: figure, method, n, median, p95, and its ratio `versus`."""
    return (
        figure,
        series.label,
        f"{len(series.samples_s)}",
        ms(series.median_s),
        ms(series.p95_s),
        versus,
    )
