"""Family 13: forking a session that holds a lot of changes into many.

A daemon with the throughput family's limits and `[pool] size` at the fork count, then one
without a pool. A source session writes `fork_mb` MB of random bytes into /tmp; then
`POST /v1/sessions/{id}/fork` into `fork_into` new sessions, timed from the request to the
answer (every fork started and filled), the forks closed afterwards, outside the timing.
Rows: the forks taking warm sandboxes (the pool full first), into one fork (what one copy
costs), and the forks started cold (no pool). Each fork's copy
is checked (its checksum against the source's) after the timing.
"""

from __future__ import annotations

import time
import uuid

import anyio
import httpx

from bench.daemon import BenchSetupError, check_image, running_daemon
from bench.plan import Plan
from bench.pool import until_full
from bench.results import Section, Series, SeriesGroup, Target, ms
from bench.roundtrip import CommandFailed
from bench.throughput import MEMORY_PER_CONTAINER, daemon_config
from sandboxd.api import API_PREFIX, ForkRequest
from sandboxd.client.connection import async_daemon_client
from sandboxd.sizes import parse_size

FAMILY = "fork"
TITLE = "Forking a session that holds many changes into many"
TARGET_S = 2.0
TIMEOUT_S = 600.0
CHECKSUM = "md5sum /tmp/changes | cut -d' ' -f1"

INTO_MANY = "into {n}, warm pool"
INTO_ONE = "into 1, warm pool"
INTO_MANY_COLD = "into {n}, no pool"


async def _run(client: httpx.AsyncClient, session: str, command: str) -> str:
    response = await client.post(f"{API_PREFIX}/run", json={"session": session, "command": command})
    if response.status_code != 200:
        raise CommandFailed(f"HTTP {response.status_code}: {response.text[:300]}")
    result = response.json()
    if result.get("exit_code") != 0:
        raise CommandFailed(f"{command!r} failed: {result.get('stderr') or result.get('error')}")
    return str(result.get("stdout", "")).strip()


async def _fork_s(client: httpx.AsyncClient, source: str, count: int, checksum: str) -> float:
    """One fork into `count` new sessions: its time; the copies checked, then closed."""
    into = tuple(f"bench-fork-{uuid.uuid4().hex[:8]}" for _ in range(count))
    began = time.perf_counter()
    response = await client.post(
        f"{API_PREFIX}/sessions/{source}/fork",
        content=ForkRequest(into=into).model_dump_json(),
    )
    elapsed = time.perf_counter() - began
    try:
        if response.status_code != 200:
            raise CommandFailed(f"HTTP {response.status_code}: {response.text[:300]}")
        for session in into:
            if await _run(client, session, CHECKSUM) != checksum:
                raise CommandFailed(f"fork {session} does not hold the source's changes")
    finally:
        with anyio.CancelScope(shield=True):
            for session in into:
                await client.delete(f"{API_PREFIX}/sessions/{session}")
    return elapsed


async def run(plan: Plan) -> Section:
    check_image(plan.image)
    count = plan.fork_into
    memory = count * parse_size(MEMORY_PER_CONTAINER)
    plain = daemon_config((2 * count + 2,))
    rows = (  # (warm pool size, labels)
        (count, (INTO_MANY.format(n=count), INTO_ONE)),
        (0, (INTO_MANY_COLD.format(n=count),)),
    )
    samples: dict[str, list[float]] = {label: [] for _, labels in rows for label in labels}
    failures: list[str] = []
    for pool, labels in rows:
        config = f"{plain}[pool]\nsize = {pool}\nmemory = {memory}\n" if pool else plain
        with running_daemon(plan.image, config) as daemon:
            async with async_daemon_client(daemon.socket, TIMEOUT_S) as http:
                source = await _prepared_source(http, plan.fork_mb)
                checksum = await _run(http, source, CHECKSUM)
                for _ in range(plan.fork_iterations):
                    for label in labels:
                        if pool:
                            await until_full(http, pool)
                        into = 1 if label == INTO_ONE else count
                        try:
                            samples[label].append(await _fork_s(http, source, into, checksum))
                        except CommandFailed as exc:
                            failures.append(f"{label}: {exc}")
    return _section(plan, samples, failures)


async def _prepared_source(http: httpx.AsyncClient, mb: int) -> str:
    """A session holding `mb` MB of changes (the pool, if any, warmed for its spec)."""
    source = f"bench-fork-source-{uuid.uuid4().hex[:6]}"
    try:
        await _run(http, f"bench-fork-other-{uuid.uuid4().hex[:6]}", "true")
        await _run(http, source, f"head -c {mb * 10**6} /dev/urandom > /tmp/changes")
    except CommandFailed as exc:
        raise BenchSetupError(f"the source session could not be prepared: {exc}") from exc
    return source


def _section(plan: Plan, samples: dict[str, list[float]], failures: list[str]) -> Section:
    series = {label: Series(label, tuple(values)) for label, values in samples.items()}
    many = series[INTO_MANY.format(n=plan.fork_into)]
    rows = tuple(
        (
            f"fork of {plan.fork_mb} MB",
            s.label,
            f"{len(s.samples_s)}",
            ms(s.median_s),
            ms(s.p95_s),
        )
        for s in series.values()
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("figure", "method", "n", "median", "p95"),
        rows=rows,
        groups=(SeriesGroup(f"Fork of {plan.fork_mb} MB of changes", tuple(series.values())),),
        targets=(
            Target(
                f"fork of {plan.fork_mb} MB of changes into {plan.fork_into} <= {TARGET_S:g} s",
                ms(many.median_s),
                bool(many.samples_s) and many.median_s <= TARGET_S,
            ),
        ),
        notes=(
            f"{plan.fork_iterations} samples each, the pool full before each (a daemon "
            "without one for the cold row); a sample is POST .../fork until its answer (every "
            "fork started and filled); each fork's checksum is compared with the source's "
            "afterwards, outside the timing",
            "the copy is made by a one-shot copier container (the source frozen by the cgroup "
            "freezer meanwhile) that mounts the source's tmpfs volumes read-only and the forks' "
            "read-write, and no host path; the pool starts no refill until it is done",
        ),
        problems=tuple(failures[:3]),
        raw={"mb": plan.fork_mb, "into": plan.fork_into},
    )
