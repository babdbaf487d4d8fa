"""Family `serve`: what `logos serve` adds between a run and its clients.

The real server (`bench.serve_server`: uvicorn, the app, the runs and their event logs) runs
in a child process with a scripted in-process model; this process is the client, over
loopback HTTP, reading real server-sent event streams.

- latency: each delta the model produces carries the time.monotonic() of its making (the
  loop's `on_delta` callback publishes it in the same step); the client subtracts it from
  the moment it reads the event's data line. CLOCK_MONOTONIC is one clock for both
  processes.
- concurrency: N runs started at once, each running `true` locally and answering, each
  watched to its `done` by its own event stream; any failure is an error.
- memory: the server's resident memory before and after N runs that each wait for an
  approval nobody gives, divided by N.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.daemon import BenchSetupError
from bench.plan import Plan
from bench.processes import stop_process
from bench.results import (
    MEASURE_HEADERS,
    Section,
    Series,
    SeriesGroup,
    Target,
    measure_row,
    mib,
    ms,
    percentile,
)

FAMILY = "serve"
TITLE = "logos serve: event latency to an SSE client, concurrent runs, memory per idle run"
TARGET_MEDIAN_MS = 2.0
LATENCY_INTERVAL_S = 0.005
"""Between deltas: a fast model's pace, without piling events up."""
LATENCY_START_DELAY_S = 0.5
"""Before the first delta: time for the client to subscribe, so no sample is a replay."""
_START_TIMEOUT_S = 30.0
_REPO = Path(__file__).resolve().parents[1]


async def run(plan: Plan) -> Section:
    problems: list[str] = []
    connections = 4 * plan.serve_concurrent_runs
    async with bench_server("logos-bench-serve-", problems, connections) as (client, pid):
        latency_s = await _latency(client, plan.serve_latency_events)
        # WHY before the concurrent runs: memory they freed would hide the idle runs'.
        per_idle, idle_before, idle_after = await _idle_memory(client, pid, plan.serve_idle_runs)
        errors, run_s, wall_s = await _concurrent(client, plan.serve_concurrent_runs)
    problems += errors
    median = statistics.median(latency_s)
    runs = plan.serve_concurrent_runs
    rows = (
        measure_row(
            "event latency: model delta → SSE client", latency_s, f"max {ms(max(latency_s))}"
        ),
        (
            f"{runs} concurrent runs (one command each), POST → done",
            str(runs),
            ms(statistics.median(run_s)) if run_s else "n/a",
            ms(percentile(run_s, 95)) if run_s else "n/a",
            f"{len(errors)} errors, all done in {wall_s:.2f} s",
        ),
        (
            "server memory per idle run (waiting for approval)",
            str(plan.serve_idle_runs),
            f"{per_idle / 1024:.0f} KiB",
            "",
            f"RSS {mib(idle_before)} → {mib(idle_after)}",
        ),
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=MEASURE_HEADERS,
        rows=rows,
        groups=(
            SeriesGroup(
                "logos serve: model delta → SSE client", (Series("latency", tuple(latency_s)),)
            ),
        ),
        targets=(
            Target(
                f"event latency median ≤ {TARGET_MEDIAN_MS:g} ms",
                ms(median),
                median * 1000 <= TARGET_MEDIAN_MS,
            ),
            Target(f"{runs} concurrent runs, zero errors", f"{len(errors)} errors", not errors),
        ),
        notes=(
            f"deltas every {LATENCY_INTERVAL_S * 1000:g} ms; each event is written to the run's "
            "event log before it is sent; server and client share the machine's cores",
        ),
        problems=tuple(problems),
        raw={
            "latency_s": latency_s,
            "run_s": run_s,
            "concurrent_wall_s": wall_s,
            "idle_rss_before": idle_before,
            "idle_rss_after": idle_after,
        },
    )


@contextlib.asynccontextmanager
async def bench_server(
    prefix: str, problems: list[str], connections: int = 16
) -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    """The bench server in a child process on a new state directory, and a client of it
    (with its token) and its pid; stopped and removed after, a slow stop noted in
    `problems`."""
    state = Path(tempfile.mkdtemp(prefix=prefix))
    server = _start_server(state)
    try:
        url = _wait_serving(server)
        token = (state / "token").read_text().strip()
        headers = {"authorization": f"Bearer {token}"}
        limits = httpx.Limits(max_connections=connections)
        async with httpx.AsyncClient(
            base_url=url, headers=headers, timeout=60, limits=limits
        ) as client:
            yield client, server.pid
    finally:
        if not stop_process(server):
            problems.append("the bench server did not stop within 30 s of SIGTERM")
        shutil.rmtree(state, ignore_errors=True)


def _start_server(state: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.serve_server", str(state)],
        cwd=_REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_serving(server: subprocess.Popen[str]) -> str:
    assert server.stdout is not None
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if line.startswith("serving on "):
            return line.split()[-1]
        if not line and server.poll() is not None:
            break
    raise BenchSetupError("the bench server (python -m bench.serve_server) did not start")


async def _start(client: httpx.AsyncClient, prompt: str, approval: str) -> str:
    answer = await client.post("/v1/runs", json={"prompt": prompt, "approval": approval})
    if answer.status_code != 201:
        raise RuntimeError(f"POST /v1/runs answered {answer.status_code}: {answer.text}")
    run_id: str = answer.json()["run"]
    return run_id


async def sse_events(
    client: httpx.AsyncClient, path: str
) -> AsyncGenerator[tuple[str, dict[str, Any], float]]:
    """The server-sent events at `path` as they arrive: (type, data, time.monotonic() when
    its data line was read)."""
    kind = ""
    async with client.stream("GET", path) as response:
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                at = time.monotonic()
                yield kind, json.loads(line[6:]), at


async def run_events(
    client: httpx.AsyncClient, run_id: str
) -> list[tuple[str, dict[str, Any], float]]:
    """A run's events, as `sse_events` gives them, until `done`."""
    received = []
    async with contextlib.aclosing(sse_events(client, f"/v1/runs/{run_id}/events")) as events:
        async for event in events:
            received.append(event)
            if event[0] == "done":
                break
    return received


async def _latency(client: httpx.AsyncClient, count: int) -> list[float]:
    prompt = f"stamp {count} {LATENCY_INTERVAL_S} {LATENCY_START_DELAY_S}"
    run_id = await _start(client, prompt, "never-run")
    events = await run_events(client, run_id)
    return [at - float(data["text"]) for kind, data, at in events if kind == "delta"]


async def _concurrent(client: httpx.AsyncClient, runs: int) -> tuple[list[str], list[float], float]:
    errors: list[str] = []
    took: list[float] = []

    async def one() -> None:
        started = time.monotonic()
        try:
            run_id = await _start(client, "work", "auto")
            events = await run_events(client, run_id)
        except (httpx.HTTPError, RuntimeError) as exc:
            errors.append(f"a run failed: {exc!r}")
            return
        done = [data for kind, data, _ in events if kind == "done"]
        results = [data["result"] for kind, data, _ in events if kind == "command_result"]
        if not done or done[0]["stop_reason"] != "final":
            errors.append(f"run {run_id} ended with {done[0] if done else 'no done event'}")
        elif [r["exit_code"] for r in results] != [0]:
            errors.append(f"run {run_id}: its command came back {results}")
        else:
            took.append(time.monotonic() - started)

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for _ in range(runs):
            group.start_soon(one)
    return errors, took, time.monotonic() - started


async def _idle_memory(client: httpx.AsyncClient, pid: int, runs: int) -> tuple[float, int, int]:
    before = _rss(pid)
    run_ids = [await _start(client, "wait", "confirm") for _ in range(runs)]
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        pending = (await client.get("/v1/approvals")).json()["approvals"]
        if len(pending) >= runs:
            break
        await anyio.sleep(0.05)
    after = _rss(pid)
    for run_id in run_ids:
        await client.post(f"/v1/runs/{run_id}/cancel")
    while (await client.get("/v1/approvals")).json()["approvals"]:
        await anyio.sleep(0.05)  # WHY: the next measure wants the runner slots free
    return (after - before) / runs if runs else math.nan, before, after


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise BenchSetupError(f"no VmRSS for the bench server (pid {pid})")
