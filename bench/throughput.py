"""Family 2: many sessions through ONE daemon, each issuing `true` as fast as it can.

Each level starts its sessions (one warm container each) before the clock starts, then
every session runs commands back to back for a fixed time. Errors must be zero; the
daemon's resident memory is watched for the whole level, session start-up included.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import anyio

from bench.daemon import check_image, running_daemon
from bench.memory import PeakRss
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, mib, ms
from logos.options import ExecOptions
from sandboxd.client.runner import SandboxRunner

FAMILY = "throughput"
PIDS_PER_CONTAINER = 128
MEMORY_PER_CONTAINER = "512m"
TITLE = "Throughput: concurrent sessions through one daemon (`true`)"
COMMAND = "true"


@dataclass
class Level:
    sessions: int
    start_s: float = 0.0
    """Wall time to start every session's container (the first command of each)."""
    elapsed_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rss_before_bytes: int = 0
    rss_peak_bytes: int = 0

    @property
    def label(self) -> str:
        return f"{self.sessions} session{'' if self.sessions == 1 else 's'}"

    @property
    def commands_per_s(self) -> float:
        return len(self.latencies_s) / self.elapsed_s if self.elapsed_s > 0 else 0.0


async def measure_level(socket: str, pid: int, sessions: int, duration_s: float) -> Level:
    level = Level(sessions)
    runners = [
        SandboxRunner(socket, session=f"bench-tp{sessions}-{i}-{uuid.uuid4().hex[:6]}")
        for i in range(sessions)
    ]
    options = ExecOptions()

    async def issue(runner: SandboxRunner, record: bool) -> None:
        started = time.perf_counter()
        result = await runner.run(COMMAND, options)
        if not result.ok:
            level.errors.append(
                f"exit {result.exit_code}, error {result.error!r}, stderr {result.stderr[-200:]!r}"
            )
        elif record:
            level.latencies_s.append(time.perf_counter() - started)

    async def warm(runner: SandboxRunner) -> None:
        await issue(runner, record=False)

    async def drive(runner: SandboxRunner, deadline: float) -> None:
        while time.perf_counter() < deadline:
            await issue(runner, record=True)

    try:
        with PeakRss(pid) as rss:
            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for runner in runners:
                    group.start_soon(warm, runner)
            level.start_s = time.perf_counter() - started
            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for runner in runners:
                    group.start_soon(drive, runner, started + duration_s)
            level.elapsed_s = time.perf_counter() - started
        level.rss_before_bytes = rss.baseline_bytes
        level.rss_peak_bytes = rss.peak_bytes
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as group:
                for runner in runners:
                    group.start_soon(runner.aclose)
    return level


def daemon_config(levels: tuple[int, ...]) -> str:
    """The daemon's caps and limits for the largest level.

    WHY: at the default 512 pids and 2 GiB per container, 64 containers could use every pid
    of a host with pid_max 32768, and the daemon's caps derived from the host refuse them.
    `true` needs neither: smaller containers, and caps that fit the largest level exactly.
    """
    most = max(levels)
    return (
        f"max_sessions = {most}\nmax_sessions_per_caller = {most}\n"
        f'[limits]\npids = {PIDS_PER_CONTAINER}\nmemory = "{MEMORY_PER_CONTAINER}"\n'
    )


async def run(plan: Plan) -> Section:
    check_image(plan.image)
    levels: list[Level] = []
    with running_daemon(plan.image, daemon_config(plan.throughput_levels)) as daemon:
        for sessions in plan.throughput_levels:
            levels.append(
                await measure_level(
                    str(daemon.socket), daemon.pid, sessions, plan.throughput_duration_s
                )
            )
    rows: list[tuple[str, ...]] = []
    problems: list[str] = []
    for level in levels:
        series = Series(level.label, tuple(level.latencies_s))
        rows.append(
            (
                f"{level.sessions}",
                f"{level.start_s:.2f} s",
                f"{len(level.latencies_s)}",
                f"{level.commands_per_s:.0f}",
                ms(series.median_s),
                ms(series.p95_s),
                f"{len(level.errors)}" if not level.errors else f"{len(level.errors)} !!",
                mib(level.rss_before_bytes),
                mib(level.rss_peak_bytes),
            )
        )
        if level.errors:
            problems.append(
                f"{len(level.errors)} commands FAILED at {level.sessions} sessions (must be 0), "
                f"e.g. {level.errors[0]}"
            )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "sessions",
            "start-up",
            "commands",
            "cmd/s",
            "p50",
            "p95",
            "errors",
            "daemon RSS before",
            "daemon RSS peak",
        ),
        rows=tuple(rows),
        groups=(
            SeriesGroup(
                "Throughput: latency per command under load",
                tuple(Series(lv.label, tuple(lv.latencies_s)) for lv in levels),
            ),
        ),
        notes=(
            f"each level runs {plan.throughput_duration_s:g} s after its sessions have started; "
            f"containers have {PIDS_PER_CONTAINER} pids and {MEMORY_PER_CONTAINER} of memory, "
            f"the daemon's max_sessions is {max(plan.throughput_levels)}; "
            "start-up is the wall time to start all of a level's containers at once; the "
            "clients share this machine's cores with the daemon and the containers",
        ),
        problems=tuple(problems),
        raw={
            "levels": [
                {
                    "sessions": lv.sessions,
                    "start_s": lv.start_s,
                    "elapsed_s": lv.elapsed_s,
                    "commands_per_s": lv.commands_per_s,
                    "errors": lv.errors,
                    "daemon_rss_before_bytes": lv.rss_before_bytes,
                    "daemon_rss_peak_bytes": lv.rss_peak_bytes,
                }
                for lv in levels
            ]
        },
    )
