"""`python -m bench`: run the benchmark families side by side, print one table, save the rest.

Exit status: 0 when every family ran cleanly (missed targets are results, not failures),
1 when a family could not run or recorded failures (the table says which), 2 on bad usage,
130 when stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import anyio

from bench import (
    batch,
    egress,
    first_question,
    flood,
    fork,
    local_model,
    loop_overhead,
    mcp,
    overlap,
    page,
    parser_speed,
    pool,
    pool_switch,
    prepare,
    program_start,
    projects,
    restore,
    roundtrip,
    serve,
    small_model,
    temenos,
    throughput,
)
from bench.daemon import BenchSetupError
from bench.machine import QUIET_BUSY_SHARE, machine_info, wait_until_quiet
from bench.plan import DEFAULT_IMAGE, Plan
from bench.report import draw_chart, render_table, write_json
from bench.results import Section

DEFAULT_OUT = Path(__file__).resolve().parent / "out"
JSON_NAME = "results.json"
CHART_NAME = "latency.png"
TABLE_NAME = "table.txt"
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT)."""

Family = Callable[[Plan], Awaitable[Section]]
FAMILIES: dict[str, tuple[str, Family]] = {
    roundtrip.FAMILY: (roundtrip.TITLE, roundtrip.run),
    throughput.FAMILY: (throughput.TITLE, throughput.run),
    loop_overhead.FAMILY: (loop_overhead.TITLE, loop_overhead.run),
    parser_speed.FAMILY: (parser_speed.TITLE, parser_speed.run),
    overlap.FAMILY: (overlap.TITLE, overlap.run),
    flood.FAMILY: (flood.TITLE, flood.run),
    serve.FAMILY: (serve.TITLE, serve.run),
    projects.FAMILY: (projects.TITLE, projects.run),
    page.FAMILY: (page.TITLE, page.run),
    prepare.FAMILY: (prepare.TITLE, prepare.run),
    pool.FAMILY: (pool.TITLE, pool.run),
    pool_switch.FAMILY: (pool_switch.TITLE, pool_switch.run),
    fork.FAMILY: (fork.TITLE, fork.run),
    batch.FAMILY: (batch.TITLE, batch.run),
    small_model.FAMILY: (small_model.TITLE, small_model.run),
    first_question.FAMILY: (first_question.TITLE, first_question.run),
    local_model.FAMILY: (local_model.TITLE, local_model.run),
    temenos.FAMILY: (temenos.TITLE, temenos.run),
    egress.FAMILY: (egress.TITLE, egress.run),
    mcp.FAMILY: (mcp.TITLE, mcp.run),
    restore.FAMILY: (restore.TITLE, restore.run),
    program_start.FAMILY: (program_start.TITLE, program_start.run),
}
DEFAULT_FAMILIES = [
    name for name in FAMILIES if name not in (small_model.FAMILY, first_question.FAMILY)
]
"""What runs without --only: the small-model family takes about an hour, the first-question
one half an hour, and both need the models (scripts/fetch-model NAME), so they run when
asked for."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.smoke:
        plan = Plan.smoke(args.image)
    elif args.quick:
        plan = Plan.quick(args.image)
    else:
        plan = Plan(image=args.image)
    if args.n is not None:
        plan = plan.with_iterations(args.n)
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(
            f"bench: cannot create the output directory {out} ({exc}): choose another --out",
            file=sys.stderr,
        )
        return 2
    machine = machine_info()
    started = datetime.now(UTC)
    try:
        sections = anyio.run(_run_families, plan, args.only)
    except KeyboardInterrupt:
        print(
            "bench: interrupted; nothing was written (the daemons and containers it started "
            "are removed)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    table = render_table(sections, machine)
    chart_problem = draw_chart(out / CHART_NAME, sections)
    write_json(
        out / JSON_NAME,
        sections,
        machine,
        {
            "started_at": started.isoformat(),
            "duration_s": (datetime.now(UTC) - started).total_seconds(),
            "argv": list(sys.argv[1:] if argv is None else argv),
            "plan": dataclasses.asdict(plan),
            "container_label": roundtrip.RUN_LABEL,
        },
    )
    (out / TABLE_NAME).write_text(table + "\n")
    print(table)
    print()
    print(f"samples and machine info: {out / JSON_NAME}")
    if chart_problem is None and any(s.groups for s in sections):
        print(f"latency chart: {out / CHART_NAME}")
    elif chart_problem is not None:
        print(chart_problem)
    return 1 if any(section.problems for section in sections) else 0


async def _run_families(plan: Plan, only: Sequence[str]) -> list[Section]:
    sections = []
    for number, name in enumerate(only, 1):
        title, family = FAMILIES[name]
        waited, busy = 0.0, 0.0
        if plan.settle_max_s > 0:
            waited, busy = await anyio.to_thread.run_sync(wait_until_quiet, plan.settle_max_s)
        settled = f" (waited {waited:.1f} s for the machine to settle)" if waited > 1 else ""
        _progress(f"[{number}/{len(only)}] {name}: {title} ...{settled}")
        started = time.perf_counter()
        try:
            section = await family(plan)
        except BenchSetupError as exc:
            section = Section(name, title, (), (), problems=(f"{name} could not run: {exc}",))
        except Exception as exc:  # a broken family must not hide the others' results
            traceback.print_exc(file=sys.stderr)
            section = Section(
                name,
                title,
                (),
                (),
                problems=(
                    f"{name} crashed ({type(exc).__name__}: {exc}); the traceback is on stderr",
                ),
            )
        if busy >= QUIET_BUSY_SHARE:
            section = dataclasses.replace(
                section,
                notes=(
                    *section.notes,
                    f"the machine was still {busy:.0%} busy when this family started: "
                    "its figures include that load",
                ),
            )
        sections.append(section)
        _progress(f"      done in {time.perf_counter() - started:.1f} s")
    return sections


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _family_list(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {', '.join(unknown) or '(none given)'}: "
            f"choose from {','.join(FAMILIES)}"
        )
    return names


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"-n takes a whole number of at least 1, not {value!r}")
    return number


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark logos and sandboxd against docker exec, docker run --rm, "
        "docker-py and mini-swe-agent; print a table, save JSON and a PNG chart.",
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument(
        "--quick", action="store_true", help="small counts: proves the harness, not the numbers"
    )
    sizes.add_argument(
        "--smoke",
        action="store_true",
        help="the least work that runs every part of a family, without waiting for a quiet "
        "machine: the test suite's size",
    )
    parser.add_argument(
        "--only",
        type=_family_list,
        default=DEFAULT_FAMILIES,
        metavar="NAMES",
        help=f"comma-separated subset, in order, of {','.join(FAMILIES)} (default: all but "
        f"{small_model.FAMILY} and {first_question.FAMILY})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"where {JSON_NAME}, {CHART_NAME} and {TABLE_NAME} go (default: bench/out)",
    )
    parser.add_argument(
        "-n",
        type=_positive_int,
        default=None,
        metavar="N",
        help="interleaved round trips per method (cold methods, the prepare and pool families "
        "take N/3); "
        "default 30, quick 5",
    )
    parser.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"the sandbox image for every Docker method (default: {DEFAULT_IMAGE})",
    )
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
