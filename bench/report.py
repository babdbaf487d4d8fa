"""The run's outputs: the printed table, the JSON of every sample, the latency chart."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.machine import summary_line
from bench.results import Section, SeriesGroup, Target, percentile

_NUMERIC = re.compile(r"^(?:[0-9.]+|n/a)")
CHART_COLUMNS = 2
TEXT_WIDTH = 100


def render_table(sections: Sequence[Section], machine: dict[str, Any]) -> str:
    lines = [f"logos bench: {summary_line(machine)}", ""]
    for number, section in enumerate(sections, 1):
        lines.append(f"{number}. {section.title}")
        if section.rows:
            lines += ["   " + line for line in _aligned(section.headers, section.rows)]
        for note in section.notes:
            lines += _wrapped(f"note: {note}")
        for problem in section.problems:
            lines += _wrapped(f"!! PROBLEM: {problem}")
        lines.append("")
    targets = [target for section in sections for target in section.targets]
    if targets:
        lines.append("Targets")
        width = max(len(target.goal) for target in targets)
        lines += [
            f"   {'PASS' if t.passed else 'MISS'}  {t.goal:<{width}}  {t.measured}" for t in targets
        ]
        lines.append("")
    lines.append(_verdict(targets, sum(len(s.problems) for s in sections)))
    return "\n".join(lines)


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(
        text,
        TEXT_WIDTH,
        initial_indent="   ",
        subsequent_indent="         ",
        break_on_hyphens=False,
    )


def _verdict(targets: Sequence[Target], problems: int) -> str:
    missed = [t for t in targets if not t.passed]
    if targets:
        verdict = f"{len(targets) - len(missed)} of {len(targets)} targets met"
    else:
        verdict = "no targets in the parts that ran"
    if missed:
        verdict += f"; MISSED: {len(missed)}"
    if problems:
        verdict += f"; {problems} PROBLEM(S) above: these numbers are not complete"
    return verdict


def _aligned(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    columns = list(zip(headers, *rows, strict=True))
    widths = [max(len(cell) for cell in column) for column in columns]
    # Numbers line up on the right; words read better on the left.
    right = [all(_NUMERIC.match(cell) for cell in column[1:]) for column in columns]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(width) if flush_right else cell.ljust(width)
            for cell, width, flush_right in zip(cells, widths, right, strict=True)
        ).rstrip()

    return [line(headers), "  ".join("-" * width for width in widths), *map(line, rows)]


def write_json(
    path: Path, sections: Sequence[Section], machine: dict[str, Any], meta: dict[str, Any]
) -> None:
    document = {
        **meta,
        "machine": machine,
        "sections": {
            section.family: {
                "title": section.title,
                "table": {"headers": section.headers, "rows": section.rows},
                "targets": [dataclasses.asdict(t) for t in section.targets],
                "notes": section.notes,
                "problems": section.problems,
                "samples_s": {
                    group.title: {s.label: list(s.samples_s) for s in group.series}
                    for group in section.groups
                },
                "raw": section.raw,
            }
            for section in sections
        },
    }
    path.write_text(json.dumps(_jsonable(document), indent=1, allow_nan=False) + "\n")


def _jsonable(value: object) -> object:
    """`value` with NaN and infinities as null (JSON has neither) and paths as text.

    WHY a walk rather than `json.dumps(default=...)`: `default` is never called for floats.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return value


def draw_chart(path: Path, sections: Sequence[Section]) -> str | None:
    """One panel per series group (log-scale x); returns the reason when it cannot draw."""
    groups = [group for section in sections for group in section.groups if _drawable(group)]
    if not groups:
        return None
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return "no chart: matplotlib is not installed (`pip install -e '.[bench]'`)"
    rows = math.ceil(len(groups) / CHART_COLUMNS)
    # WHY Figure + FigureCanvasAgg and not pyplot: no global state, no GUI backend lookup.
    figure = Figure(figsize=(8 * CHART_COLUMNS, 4.2 * rows), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, CHART_COLUMNS, squeeze=False).flatten()
    for ax, group in zip(axes, groups, strict=False):
        _draw_distributions(ax, group)
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    figure.suptitle(
        "Latency per sample: dots; bar p25-p75, line p5-p95, | median (further left is faster)",
        fontsize=13,
    )
    figure.savefig(path, dpi=100)
    return None


def _drawable(group: SeriesGroup) -> bool:
    return any(series.samples_s for series in group.series)


def _draw_distributions(ax: Any, group: SeriesGroup) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    jitter = random.Random(0)
    shown = [series for series in group.series if series.samples_s]
    colors = [f"C{index % 10}" for index in range(len(shown))]
    for row, (series, color) in enumerate(zip(shown, colors, strict=True)):
        y = len(shown) - 1 - row  # first series on top
        values = [value * 1000 for value in series.samples_s]
        ax.scatter(
            values,
            [y + jitter.uniform(-0.18, 0.18) for _ in values],
            s=9,
            alpha=0.35,
            color=color,
            linewidths=0,
        )
        low, q1, median, q3, high = (percentile(values, q) for q in (5, 25, 50, 75, 95))
        ax.hlines(y, low, high, color=color, linewidth=1.5)
        ax.hlines(y, q1, q3, color=color, linewidth=7, alpha=0.55)
        ax.plot([median], [y], marker="|", markersize=18, markeredgewidth=2.5, color="black")
        ax.text(median, y + 0.26, f"{median:.3g} ms", ha="center", va="bottom", fontsize=8)
    ax.set_yticks(range(len(shown)), [s.label for s in reversed(shown)], fontsize=9)
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.margins(x=0.08)
    ax.set_xlabel("milliseconds (log scale)")
    ax.set_title(group.title, fontsize=11)
    ax.grid(True, axis="x", which="both", alpha=0.3)
