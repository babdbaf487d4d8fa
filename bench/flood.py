"""Family 5: memory while one command writes a flood of output (1 GiB by default).

Capture is bounded (head + tail, the rest counted, part saved to a file), so the memory of
whoever reads the output must not grow with it. The local runner is measured in a fresh
child process, so that its baseline is clean; the sandbox path is measured on the daemon
and on the in-container supervisor (through its host pid).

Then the daemon's worst case: several requests at once whose output is control characters
(six bytes of JSON each) at the largest max_output_bytes. The daemon admits them within its
output memory budget (max_output_memory), so its peak stays near baseline + budget, and its
memory after them must come back near its baseline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import anyio

from bench.child import child_report
from bench.daemon import (
    BenchSetupError,
    check_image,
    docker_client,
    require_image,
    running_daemon,
    session_container,
    supervisor_pid,
)
from bench.memory import PeakRss
from bench.plan import Plan
from bench.results import Section, mib
from logos.options import ExecOptions
from logos.result import Result
from logos.runners.local import LocalRunner
from sandboxd.api import MAX_OUTPUT_BYTES_LIMIT
from sandboxd.client.runner import SandboxRunner

FAMILY = "flood"
TITLE = "Output flood: peak memory while a command writes"
CHILD_TIMEOUT_S = 600.0


def flood_command(size: int) -> str:
    return f"head -c {size} /dev/zero"


def control_flood_command(size: int) -> str:
    return f"head -c {size} /dev/zero | tr '\\0' '\\1'"


@dataclass(frozen=True)
class Measured:
    """One process's resident memory around the flood."""

    who: str
    baseline_bytes: int
    peak_bytes: int
    after_bytes: int
    exact: bool

    @property
    def growth_bytes(self) -> int:
        return max(0, self.peak_bytes - self.baseline_bytes)


def _check(result: Result, size: int, where: str, byte: str = "\0") -> str | None:
    """Why the flood's result is wrong, or None: every byte must be accounted for."""
    if not result.ok:
        return f"{where}: the flood command failed: exit {result.exit_code}, {result.error!r}"
    kept = result.stdout.count(byte)
    if kept + result.stdout_dropped_bytes != size:
        return (
            f"{where}: {kept} bytes kept + {result.stdout_dropped_bytes} dropped != {size} "
            "written: the capture lost count"
        )
    return None


async def _local_child(size: int) -> dict[str, Any]:
    """Runs in the child: the flood through LocalRunner, watching our own memory."""
    async with LocalRunner() as runner:
        await runner.run("true", ExecOptions())  # load everything the flood path touches
        with PeakRss(os.getpid()) as rss:
            started = time.perf_counter()
            result = await runner.run(flood_command(size), ExecOptions())
            elapsed = time.perf_counter() - started
    _remove_saved_output(result)
    return {
        "baseline_bytes": rss.baseline_bytes,
        "peak_bytes": rss.peak_bytes,
        "after_bytes": rss.after_bytes,
        "exact": rss.exact,
        "seconds": elapsed,
        "problem": _check(result, size, "LocalRunner"),
    }


def _remove_saved_output(result: Result) -> None:
    """The runner saved tens of MiB of zeros for a model that will never read them."""
    for saved in (result.stdout_file, result.stderr_file):
        if saved is not None:
            with contextlib.suppress(OSError):
                os.remove(saved)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(saved))  # only if nothing else is in it


def measure_local(size: int) -> tuple[Measured, float, str | None]:
    report = child_report("bench.flood", str(size), timeout_s=CHILD_TIMEOUT_S)
    measured = Measured(
        "LocalRunner (the calling process)",
        report["baseline_bytes"],
        report["peak_bytes"],
        report["after_bytes"],
        report["exact"],
    )
    return measured, report["seconds"], report["problem"]


async def measure_sandbox(plan: Plan, size: int) -> tuple[list[Measured], float, str | None]:
    client = docker_client()
    try:
        require_image(client, plan.image)
        with running_daemon(plan.image) as daemon:
            session = f"bench-flood-{uuid.uuid4().hex[:8]}"
            async with SandboxRunner(daemon.socket, session=session) as runner:
                warm = await runner.run("true", ExecOptions())
                if not warm.ok:
                    raise BenchSetupError(f"the sandbox could not run `true`: {warm}")
                supervisor = supervisor_pid(session_container(client, session))
                with PeakRss(daemon.pid) as daemon_rss, PeakRss(supervisor) as supervisor_rss:
                    started = time.perf_counter()
                    result = await runner.run(flood_command(size), ExecOptions())
                    elapsed = time.perf_counter() - started
    finally:
        client.close()
    measured = [
        _measured("sandboxd daemon", daemon_rss),
        _measured("in-container supervisor", supervisor_rss),
    ]
    return measured, elapsed, _check(result, size, "SandboxRunner")


async def measure_control_flood(plan: Plan) -> tuple[Measured, float, str | None]:
    """The daemon while `control_flood_requests` sessions each flood control characters at
    the largest max_output_bytes: its peak, and what it keeps afterwards."""
    size = plan.control_flood_bytes
    options = ExecOptions(max_output_bytes=MAX_OUTPUT_BYTES_LIMIT)
    check_image(plan.image)
    with running_daemon(plan.image) as daemon:
        async with contextlib.AsyncExitStack() as stack:
            runners = [
                await stack.enter_async_context(
                    SandboxRunner(daemon.socket, session=f"bench-ctl-{uuid.uuid4().hex[:8]}")
                )
                for _ in range(plan.control_flood_requests)
            ]
            async with anyio.create_task_group() as group:
                for runner in runners:  # each session warm, with the flood's options
                    group.start_soon(runner.run, "true", options)
            results: list[Result] = []

            async def flood(runner: SandboxRunner) -> None:
                results.append(await runner.run(control_flood_command(size), options))

            with PeakRss(daemon.pid) as rss:
                started = time.perf_counter()
                async with anyio.create_task_group() as group:
                    for runner in runners:
                        group.start_soon(flood, runner)
                elapsed = time.perf_counter() - started
    problems = [_check(result, size, "control flood", "\x01") for result in results]
    return _measured("sandboxd daemon", rss), elapsed, next(filter(None, problems), None)


def _measured(who: str, rss: PeakRss) -> Measured:
    return Measured(who, rss.baseline_bytes, rss.peak_bytes, rss.after_bytes, rss.exact)


async def run(plan: Plan) -> Section:
    size = plan.flood_bytes
    problems: list[str] = []
    local, local_s, problem = await anyio.to_thread.run_sync(measure_local, size)
    if problem:
        problems.append(problem)
    sandbox, sandbox_s, problem = await measure_sandbox(plan, size)
    if problem:
        problems.append(problem)
    control, control_s, problem = await measure_control_flood(plan)
    if problem:
        problems.append(problem)
    requests = plan.control_flood_requests
    control_total = requests * plan.control_flood_bytes
    rows = [
        _row("LocalRunner", local, local_s, size),
        *(_row("SandboxRunner", m, sandbox_s, size) for m in sandbox),
        _row(f"SandboxRunner, {requests} x \\x01", control, control_s, control_total),
    ]
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "runner",
            "process",
            "RSS before",
            "RSS peak",
            "growth",
            "RSS after",
            "flood took",
            "rate",
        ),
        rows=tuple(rows),
        notes=(
            f"`{flood_command(size)}` ({size / 2**30:g} GiB) with the default ExecOptions "
            "(32 KiB kept per stream, 64 MiB saved to a file); peaks from the kernel's reset "
            "high-water mark where writable, else from sampling VmRSS every 5 ms",
            f"`{control_flood_command(plan.control_flood_bytes)}` in {requests} sessions at "
            f"once with max_output_bytes = {MAX_OUTPUT_BYTES_LIMIT // 2**20} MiB: each reply "
            "is up to 6x its output as JSON; the daemon admits them within its output memory "
            "budget (max_output_memory, 1 GiB by default)",
        ),
        problems=tuple(problems),
        raw={
            "bytes": size,
            "local": {**dataclasses.asdict(local), "seconds": local_s},
            "sandbox": [dataclasses.asdict(m) for m in sandbox],
            "sandbox_seconds": sandbox_s,
            "control": {
                **dataclasses.asdict(control),
                "seconds": control_s,
                "requests": requests,
                "bytes_each": plan.control_flood_bytes,
                "max_output_bytes": MAX_OUTPUT_BYTES_LIMIT,
            },
        },
    )


def _row(runner: str, measured: Measured, seconds: float, size: int) -> tuple[str, ...]:
    return (
        runner,
        measured.who + ("" if measured.exact else " (sampled)"),
        mib(measured.baseline_bytes),
        mib(measured.peak_bytes),
        mib(measured.growth_bytes),
        mib(measured.after_bytes),
        f"{seconds:.2f} s",
        f"{size / 2**20 / seconds:.0f} MiB/s",
    )


if __name__ == "__main__":
    print(json.dumps(anyio.run(_local_child, int(sys.argv[1]))))
