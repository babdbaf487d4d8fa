"""Family: sandboxd's temenos routes beside its native API, and temenos callers at volume.

Round trips of one command (`true`) through `POST /v1/run` (a warm session) and temenos's
`POST /run` (a warm caller id, and a new caller id each time, as `logos exec --sandbox
temenos` sends), interleaved; a job's start (the request until its answer naming the job,
which includes the background threshold) and a poll of a running job on both APIs. Then
`temenos_callers` sequential runs, each through a new TemenosRunner (a fresh caller id, as
every `logos exec --sandbox temenos` has): how many succeed, the most live containers, and
the daemon's resident memory before and after.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.daemon import BenchDaemon, running_daemon
from bench.memory import read_status_kib
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target, ms
from logos.options import ExecOptions
from logos.temenos.runner import TemenosRunner

FAMILY = "temenos"
TITLE = "temenos routes beside the native API"
BACKGROUND_AFTER_S = 0.2
"""Both APIs' background threshold here: a job's start includes it."""
JOB_COMMAND = "sleep 600"
MIB = 1024**2


def _rss_bytes(pid: int) -> int:
    return read_status_kib(pid, "VmRSS") * 1024


Sample = Callable[[httpx.AsyncClient], Awaitable[float]]


def _ok(answer: httpx.Response) -> dict[str, Any]:
    if answer.status_code != 200:
        raise RuntimeError(f"HTTP {answer.status_code}: {answer.text[:300]}")
    body: dict[str, Any] = answer.json()
    return body


async def _timed(request: Awaitable[httpx.Response]) -> tuple[float, dict[str, Any]]:
    """How long `request` (not yet awaited, so not yet sent) takes, and its answer."""
    started = time.perf_counter()
    answer = await request
    return time.perf_counter() - started, _ok(answer)


def _samplers() -> dict[str, Sample]:
    async def native(http: httpx.AsyncClient) -> float:
        elapsed, _ = await _timed(
            http.post("/v1/run", json={"command": "true", "session": "bench"})
        )
        return elapsed

    async def temenos_warm(http: httpx.AsyncClient) -> float:
        elapsed, _ = await _timed(http.post("/run", json={"command": "true", "caller_id": "bench"}))
        return elapsed

    async def temenos_new_caller(http: httpx.AsyncClient) -> float:
        caller = f"bench-{uuid.uuid4().hex[:12]}"
        elapsed, _ = await _timed(http.post("/run", json={"command": "true", "caller_id": caller}))
        return elapsed

    return {
        "POST /v1/run, warm session": native,
        "POST /run (temenos), warm caller": temenos_warm,
        "POST /run (temenos), new caller each time": temenos_new_caller,
    }


async def _jobs(http: httpx.AsyncClient, iterations: int) -> dict[str, list[float]]:
    """Start a job and poll it once on each API, `iterations` times; stop each job."""
    samples: dict[str, list[float]] = {
        "job start, POST /v1/run": [],
        "job start, POST /run (temenos)": [],
        "job poll, GET /v1/jobs/{id}": [],
        "job poll, GET /jobs/{id} (temenos)": [],
    }
    for _ in range(iterations):
        native = {"command": JOB_COMMAND, "session": "bench", "background_after_s": 0.2}
        started, body = await _timed(http.post("/v1/run", json=native))
        samples["job start, POST /v1/run"].append(started)
        job = body["job"]["id"]
        polled, _ = await _timed(http.get(f"/v1/jobs/{job}"))
        samples["job poll, GET /v1/jobs/{id}"].append(polled)
        _ok(await http.delete(f"/v1/jobs/{job}"))

        temenos = {"command": JOB_COMMAND, "caller_id": "bench"}
        started, body = await _timed(http.post("/run", json=temenos))
        samples["job start, POST /run (temenos)"].append(started)
        job = body["job_id"]
        polled, _ = await _timed(http.get(f"/jobs/{job}"))
        samples["job poll, GET /jobs/{id} (temenos)"].append(polled)
        _ok(await http.delete(f"/jobs/{job}"))
    return samples


async def _callers(daemon: BenchDaemon, http: httpx.AsyncClient, count: int) -> dict[str, Any]:
    """`count` sequential runs, each through a new runner (a fresh caller id)."""
    before = _rss_bytes(daemon.pid)
    succeeded, most_containers = 0, 0
    failures: list[str] = []
    started = time.perf_counter()
    for _ in range(count):
        async with TemenosRunner(str(daemon.socket)) as runner:
            result = await runner.run("echo ok", ExecOptions(timeout_s=60))
        if result.ok and result.stdout == "ok\n":
            succeeded += 1
        elif len(failures) < 3:
            failures.append(f"{result.error or result.stderr[-200:]!r}")
        sessions = _ok(await http.get("/v1/sessions"))["sessions"]
        live = sum(len(session["containers"]) for session in sessions)
        most_containers = max(most_containers, live)
    return {
        "runs": count,
        "succeeded": succeeded,
        "failures": failures,
        "most_live_containers": most_containers,
        "rss_before_bytes": before,
        "rss_after_bytes": _rss_bytes(daemon.pid),
        "seconds": time.perf_counter() - started,
    }


async def run(plan: Plan) -> Section:
    config = f"temenos_background_after_s = {BACKGROUND_AFTER_S}\n"
    samplers = _samplers()
    samples: dict[str, list[float]] = {label: [] for label in samplers}
    with running_daemon(plan.image, config) as daemon:
        transport = httpx.AsyncHTTPTransport(uds=str(daemon.socket))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://sandboxd", timeout=120
        ) as http:
            for sample in samplers.values():  # warm the session and the caller
                await sample(http)
            labels = list(samplers)
            for index in range(plan.roundtrip_iterations):
                # Interleaved, from a different method each time: drift hits all alike.
                for label in labels[index % len(labels) :] + labels[: index % len(labels)]:
                    samples[label].append(await samplers[label](http))
            samples.update(await _jobs(http, max(1, plan.roundtrip_iterations // 3)))
            health = _ok(await http.get("/v1/health"))
            callers = await _callers(daemon, http, plan.temenos_callers)
    series = tuple(Series(label, tuple(values)) for label, values in samples.items())
    rows = [(s.label, ms(s.median_s), ms(s.p95_s), str(len(s.samples_s))) for s in series]
    cap = health["max_sessions_per_caller"]
    grew = (callers["rss_after_bytes"] - callers["rss_before_bytes"]) / MIB
    rows.append(
        (
            f"{callers['runs']} runs, a new caller each (cap {cap} per caller)",
            f"{callers['succeeded']} ok",
            f"{callers['most_live_containers']} live at most",
            f"RSS {callers['rss_before_bytes'] / MIB:.0f} -> "
            f"{callers['rss_after_bytes'] / MIB:.0f} MiB",
        )
    )
    problems = tuple(f"a run failed: {failure}" for failure in callers["failures"])
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("measure", "median", "p95", "samples"),
        rows=tuple(rows),
        groups=(SeriesGroup(TITLE, series),),
        targets=(
            Target(
                f"every one of {callers['runs']} new callers runs",
                f"{callers['succeeded']} of {callers['runs']}",
                callers["succeeded"] == callers["runs"],
            ),
            Target(
                f"live containers within the per-caller cap ({cap})",
                str(callers["most_live_containers"]),
                callers["most_live_containers"] <= cap,
            ),
            Target(
                "daemon memory flat over the runs (< 32 MiB growth)", f"{grew:.1f} MiB", grew < 32
            ),
        ),
        notes=(
            f"a job's start includes its {BACKGROUND_AFTER_S:g} s background threshold; its "
            "poll reads a running job (temenos: no output; native: its output so far)",
            f"the callers run in {callers['seconds']:.0f} s, each through a new TemenosRunner "
            "(what every `logos exec --sandbox temenos` is); each new caller's container "
            "takes the place of the least recently used idle one once the cap is reached",
        ),
        problems=problems,
        raw={"callers": callers, "max_sessions": health["max_sessions"], "per_caller": cap},
    )
