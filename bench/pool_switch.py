"""Family 15: callers move from one spec to another; the warm pool follows them. And where a
cold start's time goes, with each OCI runtime the engine has.

Three daemons with the throughput family's limits: `[pool] size = 4` with memory to spare,
`size = 4` with memory for two warm sandboxes (as the default budget holds two of the
default limits), and no pool. Each round, on each daemon in turn (the order rotating):
`pool_switch_starts` new sessions of a read-write spec of a fresh directory, then as many of
a read-only spec of the same directory, back to back, each closed before the next (outside
the timing), as a person moving to the next project, or a batch after an interactive
session, starts them. Between daemons, until the pool is settled, and `docker run --rm IMAGE
true` twice. Then a bare container's start (`docker start` of a created container, network
disabled as a sandbox's) with each runtime: where the engine's start step goes.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.daemon import docker_client, running_daemon
from bench.plan import Plan
from bench.pool import pool_health
from bench.prepare import timed_start
from bench.results import Section, Series, SeriesGroup, Target, ms, ratio, series_row
from bench.roundtrip import CommandFailed, docker_run_baseline
from bench.throughput import MEMORY_PER_CONTAINER, daemon_config
from sandboxd.client.connection import async_daemon_client
from sandboxd.sizes import parse_size

FAMILY = "pool_switch"
TITLE = "Callers switch specs: the warm pool follows; where a cold start's time goes"
POOL_SIZE = 4
START_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 60.0
POLL_S = 0.02
DOCKER_RUN_PER_ROUND = 2
RUNTIMES = ("runc", "crun")
"""Runtimes timed when the engine has them (scripts/setup-crun registers crun)."""
TARGET_FIRST_HIT = 3
"""The issue's bar: a spec callers switch to is served warm from its third start."""

SIZE_BOUND = "pool of 4"
MEMORY_BOUND = "pool of 4, memory for 2"
NO_POOL = "no pool"
PHASES = ("read-write spec", "then read-only spec")
DOCKER_RUN = "docker run --rm (CLI)"


@dataclass
class _Phase:
    """One daemon's starts of one phase, over the measured rounds."""

    samples: list[float] = field(default_factory=list)
    hits: list[list[bool]] = field(default_factory=list)
    """Per round, whether each start took a warm sandbox."""

    def first_hits(self) -> list[int | None]:
        """Per round, the first start (1-based) that took a warm sandbox; None: none did."""
        return [next((n for n, hit in enumerate(r, 1) if hit), None) for r in self.hits]

    def patterns(self) -> str:
        """Each round's starts in order, W warm and c cold: "ccWWWW ccWWcW"."""
        return " ".join("".join("W" if hit else "c" for hit in r) for r in self.hits)


@dataclass
class _Tally:
    phases: dict[tuple[str, str], _Phase] = field(default_factory=dict)
    docker_run: list[float] = field(default_factory=list)
    steps: dict[str, list[float]] = field(default_factory=dict)
    """The daemon's own timing of each step of the cold starts."""
    outside_steps: list[float] = field(default_factory=list)
    """A cold start's time beyond its steps: HTTP, the policy's checks, bookkeeping."""
    runtimes: dict[str, list[float]] = field(default_factory=dict)
    runtime_errors: dict[str, str] = field(default_factory=dict)
    unsettled: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


async def _settled(client: httpx.AsyncClient, warm: int) -> bool:
    """Wait until the pool holds `warm` sandboxes and starts none; False after the timeout."""
    with anyio.move_on_after(SETTLE_TIMEOUT_S):
        while True:
            health = await pool_health(client)
            starting = sum(places.starting for places in health.pool_places)
            if health.warm == warm and not starting:
                return True
            await anyio.sleep(POLL_S)
    return False


async def _switch(
    label: str, client: httpx.AsyncClient, warm: int, starts: int, tally: _Tally | None
) -> None:
    """One round on one daemon: a read-write spec, then a read-only one of the same fresh
    directory (`tally` None: the unmeasured round)."""
    directory = Path(tempfile.mkdtemp(prefix="bench-switch-"))
    try:
        for phase, read_only in zip(PHASES, (False, True), strict=True):
            body = json.dumps(
                {"allowed_paths": [{"path": str(directory), "read_only": read_only}]}
            ).encode()
            hits: list[bool] = []
            for _ in range(starts):
                try:
                    elapsed, answer = await timed_start(client, "bench-switch", body)
                except CommandFailed as exc:
                    if tally is not None:
                        tally.failures.append(f"{label}, {phase}: {exc}")
                    continue
                hits.append(not answer.steps)
                if tally is None:
                    continue
                tally.phases.setdefault((label, phase), _Phase()).samples.append(elapsed)
                if answer.steps:
                    for step, seconds in answer.steps.items():
                        tally.steps.setdefault(step, []).append(seconds)
                    tally.outside_steps.append(elapsed - sum(answer.steps.values()))
            if tally is not None:
                tally.phases.setdefault((label, phase), _Phase()).hits.append(hits)
        if not await _settled(client, warm) and tally is not None:
            tally.unsettled.append(label)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _time_runtime_start(client: Any, image: str, runtime: str) -> float:
    """A bare container's `docker start` (the runtime's part of the engine's start step),
    created with networking disabled as a sandbox without network is."""
    api = client.api
    created = api.create_container(
        image,
        ["true"],
        network_disabled=True,
        host_config=api.create_host_config(runtime=runtime, network_mode="none"),
    )["Id"]
    try:
        began = time.perf_counter()
        api.start(created)
        return time.perf_counter() - began
    finally:
        api.remove_container(created, force=True)


def _runtimes(image: str, iterations: int, tally: _Tally) -> None:
    import docker.errors

    client = docker_client()
    try:
        known = client.info().get("Runtimes", {})
        present = [runtime for runtime in RUNTIMES if runtime in known]
        for runtime in RUNTIMES:
            if runtime not in known:
                tally.runtime_errors[runtime] = "not registered with the engine: scripts/setup-crun"
        for iteration in range(iterations + 1):
            for runtime in present[iteration % 2 :] + present[: iteration % 2]:
                if runtime in tally.runtime_errors:
                    continue
                try:
                    elapsed = _time_runtime_start(client, image, runtime)
                except docker.errors.APIError as exc:
                    tally.runtime_errors[runtime] = str(exc.explanation or exc)[:300]
                    continue
                if iteration > 0:
                    tally.runtimes.setdefault(runtime, []).append(elapsed)
    finally:
        client.close()


async def run(plan: Plan) -> Section:
    docker_run = docker_run_baseline(plan.image)
    caps = daemon_config((2 * POOL_SIZE,))
    per_box = parse_size(MEMORY_PER_CONTAINER)
    configs = {
        SIZE_BOUND: (f"{caps}[pool]\nsize = {POOL_SIZE}\nmemory = {8 * per_box}\n", POOL_SIZE),
        MEMORY_BOUND: (f"{caps}[pool]\nsize = {POOL_SIZE}\nmemory = {2 * per_box}\n", 2),
        NO_POOL: (caps, 0),
    }
    tally = _Tally()
    with (
        running_daemon(plan.image, configs[SIZE_BOUND][0]) as size_bound,
        running_daemon(plan.image, configs[MEMORY_BOUND][0]) as memory_bound,
        running_daemon(plan.image, configs[NO_POOL][0]) as no_pool,
    ):
        async with (
            async_daemon_client(size_bound.socket, START_TIMEOUT_S) as size_http,
            async_daemon_client(memory_bound.socket, START_TIMEOUT_S) as memory_http,
            async_daemon_client(no_pool.socket, START_TIMEOUT_S) as cold_http,
        ):
            clients = {SIZE_BOUND: size_http, MEMORY_BOUND: memory_http, NO_POOL: cold_http}
            labels = list(clients)
            for round_number in range(plan.pool_switch_rounds + 1):
                measured = tally if round_number > 0 else None
                shift = round_number % len(labels)
                for label in labels[shift:] + labels[:shift]:
                    warm = configs[label][1]
                    await _switch(label, clients[label], warm, plan.pool_switch_starts, measured)
                    for _ in range(DOCKER_RUN_PER_ROUND):
                        try:
                            elapsed = await docker_run.once("true")
                        except CommandFailed as exc:
                            tally.failures.append(f"{DOCKER_RUN}: {exc}")
                            continue
                        if measured is not None:
                            tally.docker_run.append(elapsed)
    await anyio.to_thread.run_sync(_runtimes, plan.image, plan.pool_switch_runtime_starts, tally)
    return _section(plan, tally)


def _median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def _section(plan: Plan, tally: _Tally) -> Section:
    docker_run = Series(DOCKER_RUN, tuple(tally.docker_run))
    rows: list[tuple[str, ...]] = []
    groups: list[Series] = []
    for (label, phase), measured in tally.phases.items():
        series = Series(f"{label}: {phase}", tuple(measured.samples))
        groups.append(series)
        hits = sum(sum(round_hits) for round_hits in measured.hits)
        total = sum(len(round_hits) for round_hits in measured.hits)
        row = series_row(phase, series, ratio(series.median_s, docker_run.median_s))
        warm = f"{hits}/{total} warm: {measured.patterns()}"
        rows.append((row[0], label, *row[2:], warm))
    rows.append((*series_row("baseline", docker_run, "1.00x"), ""))
    outside = _median(tally.outside_steps)
    for step, samples in tally.steps.items():
        median = ms(_median(samples))
        rows.append(("  cold start step", step, f"{len(samples)}", median, "", "", ""))
    count = f"{len(tally.outside_steps)}"
    beyond = "HTTP, policy, path checks, bookkeeping"
    rows.append(("  cold start step", "outside the steps", count, ms(outside), "", "", beyond))
    runc = _median(tally.runtimes.get("runc", []))
    for runtime in RUNTIMES:
        samples = tally.runtimes.get(runtime, [])
        if samples:
            series = Series(f"docker start, {runtime}", tuple(samples))
            groups.append(series)
            versus = ratio(series.median_s, runc) + " vs runc"
            rows.append((*series_row("bare container start", series, "n/a"), versus))
        else:
            error = tally.runtime_errors.get(runtime, "no samples")
            rows.append(("bare container start", runtime, "0", "n/a", "n/a", "n/a", error))
    switched = tally.phases.get((SIZE_BOUND, PHASES[1]), _Phase())
    memory_switched = tally.phases.get((MEMORY_BOUND, PHASES[1]), _Phase())
    targets = []
    for label, measured in ((SIZE_BOUND, switched), (MEMORY_BOUND, memory_switched)):
        first_hits = measured.first_hits()
        met = bool(first_hits) and all(
            first is not None and first <= TARGET_FIRST_HIT for first in first_hits
        )
        described = ", ".join(f"#{first}" if first else "never" for first in first_hits)
        targets.append(
            Target(
                f"{label}: the spec switched to is served warm by its start #{TARGET_FIRST_HIT}",
                f"first warm start per round: {described}",
                met,
            )
        )
    problems = list(tally.failures[:3])
    if tally.unsettled:
        problems.append(f"pools not settled within {SETTLE_TIMEOUT_S:g} s: {tally.unsettled}")
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("figure", "method", "n", "median", "p95", "vs docker run", "pool hits"),
        rows=tuple(rows),
        groups=(SeriesGroup("New session start, callers switching specs", (*groups, docker_run)),),
        targets=tuple(targets),
        notes=(
            f"{plan.pool_switch_rounds} rounds after one unmeasured; each round, on each "
            f"daemon in turn: {plan.pool_switch_starts} new sessions of a read-write spec of a "
            "fresh directory, then as many of a read-only spec of it, back to back (each "
            "closed before the next, outside the timing); then until its pool is settled, "
            f"and `docker run --rm` {DOCKER_RUN_PER_ROUND} times",
            f"the pooled daemons: [pool] size = {POOL_SIZE}, memory for 8 or for 2 of the "
            f"throughput family's containers ({MEMORY_PER_CONTAINER} each); a start is warm "
            "when the daemon reports no start steps (it took a warm sandbox)",
            "pool hits: each round's starts in order, W taken warm, c started cold; a c after "
            "a W is the pool drained by starts closer together than a refill (a container "
            "start), not the switch",
            "cold start steps: medians of the daemon's own timing of every cold start of the "
            "measured rounds; outside the steps: a start's time beyond them",
            f"bare container start: `docker start` of a container of the image running `true`, "
            f"networking disabled, {plan.pool_switch_runtime_starts} per runtime, interleaved: "
            "the runtime's share of the engine's start step",
        ),
        problems=tuple(problems),
        raw={
            "hits": {
                f"{label}: {phase}": measured.hits
                for (label, phase), measured in tally.phases.items()
            },
            "steps_s": tally.steps,
            "outside_steps_s": tally.outside_steps,
            "runtime_errors": tally.runtime_errors,
        },
    )
