"""Family 12: a new session from the warm pool, against a cold start and `docker run --rm`.

Two daemons with the same limits and caps, one with `[pool] size` at the burst's size and one
without. Interleaved, each sample a new session's start (POST /v1/sessions/{id}/start, the
session closed afterwards, outside the timing) on each daemon, and `docker run --rm IMAGE
true`. WHY each sample waits for a full pool first: the figure is a start that finds the pool
warm, and a refill running under the other methods' samples would slow the baselines; the
time the pool takes to be full again after a claim is reported on its own row. Then a burst
of sessions started at once on each daemon (the pooled one full first), with their errors.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import httpx

from bench.daemon import BenchSetupError, running_daemon
from bench.plan import Plan
from bench.prepare import many_at_once, timed_start
from bench.results import Section, Series, SeriesGroup, Target, ms, ratio, series_row
from bench.roundtrip import docker_run_baseline, sample_rotating
from bench.throughput import MEMORY_PER_CONTAINER, daemon_config
from sandboxd.api import API_PREFIX, HealthResponse
from sandboxd.client.connection import async_daemon_client
from sandboxd.sizes import parse_size

FAMILY = "pool"
TITLE = "A new session from the warm pool (against a cold start and docker run --rm)"
COMMAND = "true"
TARGET_START_MS = 100.0
TARGET_RATIO = 0.3
START_TIMEOUT_S = 120.0
FULL_TIMEOUT_S = 300.0
POLL_S = 0.02

WARM = "new session, warm pool"
COLD = "new session, no pool"
DOCKER_RUN = "docker run --rm (CLI)"
REFILL = "pool full again after a claim"


@dataclass
class _Tally:
    samples: dict[str, list[float]] = field(
        default_factory=lambda: {WARM: [], COLD: [], DOCKER_RUN: [], REFILL: []}
    )
    missed: int = 0
    """Pooled starts that did not get a warm sandbox."""
    failures: list[str] = field(default_factory=list)


async def _start(client: httpx.AsyncClient) -> tuple[float, bool]:
    """A new session's start: its time and whether it took a warm sandbox (no start steps)."""
    elapsed, answer = await timed_start(client, "bench-pool")
    return elapsed, not answer.steps


async def pool_health(client: httpx.AsyncClient) -> HealthResponse:
    """The daemon's health, its pool able to fill (else BenchSetupError)."""
    health = HealthResponse.model_validate_json((await client.get(f"{API_PREFIX}/health")).content)
    if health.pool_problem is not None:
        raise BenchSetupError(f"the warm pool cannot fill: {health.pool_problem}")
    return health


async def until_full(client: httpx.AsyncClient, size: int) -> float:
    """Seconds until the daemon's pool holds `size` warm sandboxes."""
    began = time.perf_counter()
    with anyio.fail_after(FULL_TIMEOUT_S):
        while ((await pool_health(client)).warm or 0) < size:
            await anyio.sleep(POLL_S)
    return time.perf_counter() - began


async def run(plan: Plan) -> Section:
    docker_run = docker_run_baseline(plan.image)
    size = plan.pool_sessions
    # WHY caps of twice the burst: the burst's sessions and the pool refilling behind them.
    caps = daemon_config((2 * size,))
    memory = size * parse_size(MEMORY_PER_CONTAINER)
    pooled_config = f"{caps}[pool]\nsize = {size}\nmemory = {memory}\n"
    tally = _Tally()
    with (
        running_daemon(plan.image, pooled_config) as pooled,
        running_daemon(plan.image, caps) as cold,
    ):
        async with (
            async_daemon_client(pooled.socket, START_TIMEOUT_S) as warm_http,
            async_daemon_client(cold.socket, START_TIMEOUT_S) as cold_http,
        ):
            for _ in range(2):  # the spec the pool keeps warm (asked for again): a default one
                await _start(warm_http)
            await until_full(warm_http, size)

            async def warm_sample() -> float:
                elapsed, warm = await _start(warm_http)
                if not warm:
                    tally.missed += 1
                tally.samples[REFILL].append(await until_full(warm_http, size))
                return elapsed

            async def cold_sample() -> float:
                return (await _start(cold_http))[0]

            samplers: dict[str, Callable[[], Awaitable[float]]] = {
                WARM: warm_sample,
                COLD: cold_sample,
                DOCKER_RUN: lambda: docker_run.once(COMMAND),
            }

            def forget_warm_up() -> None:
                tally.samples[REFILL].clear()
                tally.missed = 0

            await sample_rotating(
                samplers,
                plan.pool_iterations,
                tally.samples,
                tally.failures,
                after_warm_up=forget_warm_up,
            )
            await until_full(warm_http, size)
            bursts = {
                WARM: await many_at_once(warm_http, size),
                COLD: await many_at_once(cold_http, size),
            }
    return _section(plan, tally, bursts)


def _section(plan: Plan, tally: _Tally, bursts: dict[str, tuple[float, list[str]]]) -> Section:
    series = {label: Series(label, tuple(samples)) for label, samples in tally.samples.items()}
    run_median = series[DOCKER_RUN].median_s
    rows: list[tuple[str, ...]] = []
    for label in (WARM, COLD, DOCKER_RUN):
        rows.append(
            series_row("new session", series[label], ratio(series[label].median_s, run_median))
        )
    rows.append(series_row("refill", series[REFILL], "n/a"))
    for label, (wall_s, errors) in bursts.items():
        flag = " !!" if errors else ""
        rows.append(
            (
                f"{plan.pool_sessions} at once",
                label.removeprefix("new session, "),
                "1",
                f"{wall_s:.2f} s",
                f"{len(errors)} errors{flag}",
                ratio(wall_s, bursts[COLD][0]) + " vs no pool",
            )
        )
    warm = series[WARM]
    problems = list(tally.failures[:3])
    for label, (_, errors) in bursts.items():
        if errors:
            problems.append(
                f"{len(errors)} of {plan.pool_sessions} sessions started at once ({label}) "
                f"FAILED (must be 0), e.g. {errors[0]}"
            )
    if tally.missed:
        problems.append(f"{tally.missed} pooled starts found the full pool empty")
    warm_ratio = warm.median_s / run_median if run_median else float("inf")
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("figure", "method", "n", "median", "p95", "vs docker run"),
        rows=tuple(rows),
        groups=(
            SeriesGroup("New session start, warm pool", (warm, series[COLD], series[DOCKER_RUN])),
        ),
        targets=(
            Target(
                f"new session from the warm pool <= {TARGET_START_MS:g} ms",
                f"{ms(warm.median_s)} (p95 {ms(warm.p95_s)})",
                warm.median_s * 1000 <= TARGET_START_MS,
            ),
            Target(
                f"new session from the warm pool <= {TARGET_RATIO:g}x docker run --rm",
                f"{warm_ratio:.2f}x ({ms(run_median)})",
                warm_ratio <= TARGET_RATIO,
            ),
            Target(
                f"{plan.pool_sessions} sessions at once from the warm pool without errors",
                f"{bursts[WARM][0]:.2f} s, {len(bursts[WARM][1])} errors",
                not bursts[WARM][1],
            ),
        ),
        notes=(
            f"{plan.pool_iterations} interleaved samples per method after one unmeasured round; "
            f"the pooled daemon has [pool] size = {plan.pool_sessions} and waits until its pool "
            "is full before every sample of any method (the refill row: how long that took "
            "after a claim), so the baselines do not share the machine with a refill",
            "both daemons have the throughput family's container limits; caps of twice the "
            "burst, for the burst's sessions and the refill behind them",
            "a burst: that many sessions started at once (POST .../start), closed afterwards",
        ),
        problems=tuple(problems),
        raw={
            "missed": tally.missed,
            "bursts": {
                label: {"wall_s": wall_s, "errors": errors}
                for label, (wall_s, errors) in bursts.items()
            },
        },
    )
