"""Family 6: a sandboxed run never waits for its container (the runner prepares it while the
model writes).

Through one daemon, interleaved where figures compare:

- the first command of a run, from its block closing to its result, with the loop's
  preparation and without it (the same runner, wrapped so that it has nothing to prepare),
  the scripted model taking `prepare_model_delay_s` to its first block;
- a new session's start by itself (POST /v1/sessions/{id}/start) against `docker run --rm
  IMAGE true`, with each step of the start as the daemon timed it;
- many sessions started at once (wall time, errors).
"""

from __future__ import annotations

import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx

import logos
from bench.daemon import running_daemon
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target, ms, ratio, series_row
from bench.roundtrip import CommandFailed, docker_run_baseline, sample_rotating
from bench.scripted_model import ScriptedModel
from bench.throughput import daemon_config
from logos.agent.config import Callbacks, Config
from logos.options import ExecOptions
from logos.result import Result
from logos.runners.base import Runner
from sandboxd.api import API_PREFIX, StartResponse
from sandboxd.client.connection import async_daemon_client
from sandboxd.client.runner import SandboxRunner

FAMILY = "prepare"
TITLE = "A run's first command and a new session's start (preparing while the model writes)"
COMMAND = "true"
TARGET_FIRST_COMMAND_MS = 15.0
TARGET_START_MS = 120.0
START_TIMEOUT_S = 120.0

PREPARED = "with preparation"
PREPARED_SLOW_MODEL = "with preparation, a slower model"
UNPREPARED = "without preparation"
START = "POST /v1/sessions/{id}/start"
DOCKER_RUN = "docker run --rm (CLI)"


class _Unprepared(Runner):
    """A SandboxRunner with nothing to prepare: the run's first command starts its container."""

    def __init__(self, inner: SandboxRunner) -> None:
        self._inner = inner

    async def run(self, command: str, options: ExecOptions) -> Result:
        return await self._inner.run(command, options)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class _Tally:
    samples: dict[str, list[float]] = field(
        default_factory=lambda: {
            PREPARED: [],
            PREPARED_SLOW_MODEL: [],
            UNPREPARED: [],
            START: [],
            DOCKER_RUN: [],
        }
    )
    steps: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


async def first_command_s(socket: Path, prepared: bool, model_delay_s: float) -> float:
    """One run of a fresh session: its block's time from closing to its result."""
    runner = SandboxRunner(socket, session=f"bench-first-{uuid.uuid4().hex[:8]}")
    model = ScriptedModel([f"<cmd>{COMMAND}</cmd>", "Done."], first_delta_s=model_delay_s)
    marks: dict[str, float] = {}
    results: list[Result] = []

    def on_start(index: int, command: str) -> None:
        marks["closed"] = time.perf_counter()

    def on_result(index: int, result: Result) -> None:
        marks["result"] = time.perf_counter()
        results.append(result)

    config = Config(provider=model, runner=runner if prepared else _Unprepared(runner), max_steps=2)
    try:
        outcome = await logos.run(
            config, [], "go", Callbacks(on_command_start=on_start, on_command_result=on_result)
        )
    finally:
        await runner.aclose()
    if outcome.stop_reason != "final" or len(results) != 1 or not results[0].ok:
        raise CommandFailed(f"{outcome.stop_reason} {outcome.error!r} {results}")
    return marks["result"] - marks["closed"]


async def timed_start(
    client: httpx.AsyncClient, prefix: str, body: bytes = b"{}"
) -> tuple[float, StartResponse]:
    """A new session's start by itself (`body`: its StartRequest): its time and the daemon's
    answer; the session is closed afterwards, outside the timing."""
    session = f"{prefix}-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    response = await client.post(f"{API_PREFIX}/sessions/{session}/start", content=body)
    elapsed = time.perf_counter() - began
    await client.delete(f"{API_PREFIX}/sessions/{session}")
    if response.status_code != 200:
        raise CommandFailed(f"HTTP {response.status_code}: {response.text[:300]}")
    answer = StartResponse.model_validate_json(response.content)
    if answer.state != "started":
        raise CommandFailed(f"the session was {answer.state}, not started")
    return elapsed, answer


async def start_s(client: httpx.AsyncClient, tally: _Tally) -> float:
    """A new session's start by itself; its steps go to the tally."""
    elapsed, answer = await timed_start(client, "bench-start")
    for step, seconds in answer.steps.items():
        tally.steps.setdefault(step, []).append(seconds)
    return elapsed


async def many_at_once(client: httpx.AsyncClient, sessions: int) -> tuple[float, list[str]]:
    """Start `sessions` sessions at once: the wall time, and what failed."""
    names = [f"bench-many-{n}-{uuid.uuid4().hex[:6]}" for n in range(sessions)]
    errors: list[str] = []

    async def start(name: str) -> None:
        response = await client.post(f"{API_PREFIX}/sessions/{name}/start", content="{}")
        if response.status_code != 200:
            errors.append(f"HTTP {response.status_code}: {response.text[:300]}")

    began = time.perf_counter()
    try:
        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(start, name)
        wall_s = time.perf_counter() - began
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as group:
                for name in names:
                    group.start_soon(client.delete, f"{API_PREFIX}/sessions/{name}")
    return wall_s, errors


async def run(plan: Plan) -> Section:
    docker_run = docker_run_baseline(plan.image)
    tally = _Tally()
    with running_daemon(plan.image, daemon_config((plan.prepare_sessions,))) as daemon:
        async with async_daemon_client(daemon.socket, START_TIMEOUT_S) as http:
            samplers = {
                PREPARED: lambda: first_command_s(daemon.socket, True, plan.prepare_model_delay_s),
                PREPARED_SLOW_MODEL: lambda: first_command_s(
                    daemon.socket, True, plan.prepare_slow_model_delay_s
                ),
                UNPREPARED: lambda: first_command_s(
                    daemon.socket, False, plan.prepare_model_delay_s
                ),
                START: lambda: start_s(http, tally),
                DOCKER_RUN: lambda: docker_run.once(COMMAND),
            }
            await sample_rotating(
                samplers,
                plan.prepare_iterations,
                tally.samples,
                tally.failures,
                after_warm_up=tally.steps.clear,
            )
            many_s, many_errors = await many_at_once(http, plan.prepare_sessions)
    return _section(plan, tally, many_s, many_errors)


def _section(plan: Plan, tally: _Tally, many_s: float, many_errors: list[str]) -> Section:
    series = {label: Series(label, tuple(samples)) for label, samples in tally.samples.items()}
    run_median = series[DOCKER_RUN].median_s
    rows: list[tuple[str, ...]] = []
    first = "first command: block closed → result"
    for label in (PREPARED, UNPREPARED, PREPARED_SLOW_MODEL):
        rows.append(series_row(first, series[label], "n/a"))
    for label in (START, DOCKER_RUN):
        rows.append(
            series_row("new session", series[label], ratio(series[label].median_s, run_median))
        )
    for step, samples in tally.steps.items():
        rows.append(
            ("  start step", step, f"{len(samples)}", ms(statistics.median(samples)), "", "")
        )
    errors = f"{len(many_errors)} errors" + (" !!" if many_errors else "")
    rows.append(
        (
            f"{plan.prepare_sessions} sessions at once",
            "wall time",
            "1",
            f"{many_s:.2f} s",
            errors,
            "",
        )
    )
    prepared = series[PREPARED].median_s
    start = series[START].median_s
    problems = list(tally.failures[:3])
    if many_errors:
        problems.append(
            f"{len(many_errors)} of {plan.prepare_sessions} sessions started at once FAILED "
            f"(must be 0), e.g. {many_errors[0]}"
        )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("figure", "method", "n", "median", "p95", "vs docker run"),
        rows=tuple(rows),
        groups=(
            SeriesGroup(
                "A run's first command: block closed → result",
                (series[PREPARED], series[UNPREPARED], series[PREPARED_SLOW_MODEL]),
            ),
            SeriesGroup("New session start", (series[START], series[DOCKER_RUN])),
        ),
        targets=(
            Target(
                f"first command with preparation <= {TARGET_FIRST_COMMAND_MS:g} ms "
                f"(model {plan.prepare_model_delay_s:g} s to its first block)",
                f"{ms(prepared)} (without: {ms(series[UNPREPARED].median_s)})",
                prepared * 1000 <= TARGET_FIRST_COMMAND_MS,
            ),
            Target(
                f"new session start <= {TARGET_START_MS:g} ms",
                f"{ms(start)} (docker run --rm: {ms(run_median)})",
                start * 1000 <= TARGET_START_MS,
            ),
            Target(
                f"{plan.prepare_sessions} sessions started at once without errors",
                f"{many_s:.2f} s, {len(many_errors)} errors",
                not many_errors,
            ),
        ),
        notes=(
            f"{plan.prepare_iterations} interleaved samples per method after one unmeasured "
            f"round; each first-command sample is a run of a new session (`{COMMAND}`) with a "
            f"scripted model that takes {plan.prepare_model_delay_s:g} s to its first block; "
            "without preparation, the runner is wrapped so that it has nothing to prepare; "
            f"the slower model takes {plan.prepare_slow_model_delay_s:g} s (the command finds "
            "its container running even when the engine is slow to start one)",
            "start steps are the daemon's own timing of each start (medians): image (is it "
            "one without python3), control_dir (the supervisor's files and FIFOs), create "
            "and start (the engine), handshake (until the supervisor said hello, with its "
            "mounts and whether Unix sockets are refused)",
            f"the daemon's containers have the throughput family's limits and caps (max "
            f"{plan.prepare_sessions} sessions)",
        ),
        problems=tuple(problems),
        raw={
            "steps_s": tally.steps,
            "many": {"sessions": plan.prepare_sessions, "wall_s": many_s, "errors": many_errors},
        },
    )
