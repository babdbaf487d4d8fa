"""Family 17: a daemon killed (`kill -9`) and started again loses nothing.

Each round: a daemon (the throughput family's limits), `restore_sessions` sessions that each
write a state of their own into /tmp, `restore_jobs` of them with a job running (a tick
printed every TICK_S, for longer than the daemon is away); then `kill -9`, `restore_gap_s`
with no daemon (the jobs go on printing), and a new daemon on the same socket and state
directory. Timed from the new daemon's process start: until it listens, and until the first
session answered its state (its first request). Then every session is asked for its state
(the same, in the same sandbox) and every job for its status and whole output (every tick,
those printed while no daemon was there among them); the engine is asked which containers
and volumes the state directory holds (none leaked, none lost). Baseline: a daemon started
on an empty state directory, until it listens (what taking the sandboxes over costs).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.daemon import (
    check_image,
    daemon_root,
    docker_client,
    kept_id,
    remove_leftovers,
    spawn_daemon,
    stop_daemon,
)
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target, ms, ratio
from bench.throughput import daemon_config
from sandboxd.api import API_PREFIX
from sandboxd.client.connection import async_daemon_client
from sandboxd.docker.ownership import LABEL_STATE

FAMILY = "restore"
TITLE = "A daemon killed and started again: sessions and jobs answered"
TARGET_FIRST_S = 1.0
TICK_S = 0.25
REQUEST_TIMEOUT_S = 120.0

LISTENING_EMPTY = "start to listening, nothing to take over"
LISTENING_KEPT = "start to listening, {n} sessions to take over"
FIRST_ANSWER = "start to a session's first answer"
AFTER_LISTENING = "listening to a session's first answer"
CPU_TO_FIRST = "the daemon's CPU time until that answer"


@dataclass
class _Tally:
    listening_empty: list[float] = field(default_factory=list)
    listening_kept: list[float] = field(default_factory=list)
    first_answer: list[float] = field(default_factory=list)
    after_listening: list[float] = field(default_factory=list)
    cpu_to_first: list[float] = field(default_factory=list)
    """The new daemon's own CPU time (user and system) until its first answer: what the
    machine's load does not change."""
    sessions: int = 0
    sessions_answered: int = 0
    jobs: int = 0
    jobs_answered: int = 0
    leaked: int = 0
    lost: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Session:
    name: str
    state: str
    sandbox: str
    job: str | None = None
    shown: str = ""
    """The job's output its background answer showed."""


async def run(plan: Plan) -> Section:
    check_image(plan.image)
    ticks = max(8, int((plan.restore_gap_s + 6.0) / TICK_S))
    tally = _Tally()
    for _ in range(plan.restore_iterations):
        await _round(plan, ticks, tally)
    return _section(plan, ticks, tally)


async def _round(plan: Plan, ticks: int, tally: _Tally) -> None:
    config = daemon_config((plan.restore_sessions + 1,))
    empty = daemon_root(plan.image, config)
    try:
        began = time.perf_counter()
        proc, daemon = spawn_daemon(empty)
        tally.listening_empty.append(time.perf_counter() - began)
        stop_daemon(proc, daemon)
    finally:
        remove_leftovers(empty)
        shutil.rmtree(empty, ignore_errors=True)
    root = daemon_root(plan.image, config)
    proc, daemon = spawn_daemon(root)
    try:
        async with async_daemon_client(daemon.socket, REQUEST_TIMEOUT_S) as http:
            sessions = await _sessions(http, plan, ticks)
        before = _kept(root)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        await anyio.sleep(plan.restore_gap_s)
        began = time.perf_counter()
        proc, daemon = spawn_daemon(root)
        listening = time.perf_counter()
        tally.listening_kept.append(listening - began)
        async with async_daemon_client(daemon.socket, REQUEST_TIMEOUT_S) as http:
            first = await _state(http, sessions[0])
            tally.first_answer.append(time.perf_counter() - began)
            tally.after_listening.append(time.perf_counter() - listening)
            tally.cpu_to_first.append(_cpu_s(proc.pid))
            answered = [first == sessions[0].state] + [
                await _state(http, session) == session.state for session in sessions[1:]
            ]
            tally.sessions += len(sessions)
            tally.sessions_answered += sum(answered)
            for session in sessions:
                if session.job is not None:
                    tally.jobs += 1
                    tally.jobs_answered += await _job_whole(http, session, ticks, tally)
        after = _kept(root)
        tally.leaked += len(after - before)
        tally.lost += len(before - after)
        stop_daemon(proc, daemon)
    except httpx.HTTPError as exc:
        tally.problems.append(f"{exc!r}; the daemon's log ends with:\n{daemon.log_tail(10)}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        remove_leftovers(root)
        shutil.rmtree(root, ignore_errors=True)


async def _sessions(http: httpx.AsyncClient, plan: Plan, ticks: int) -> list[_Session]:
    """The round's sessions, each with its state (the first `restore_jobs` with a job)."""
    made = []
    for index in range(plan.restore_sessions):
        name = f"bench-restore-{index}-{uuid.uuid4().hex[:6]}"
        state = uuid.uuid4().hex
        answer = await _run(http, name, f"echo {state} > /tmp/state; echo $HOSTNAME")
        session = _Session(name, state, str(answer["sandbox"]))
        if index < plan.restore_jobs:
            job = await _run(
                http,
                name,
                f"for n in $(seq {ticks}); do echo tick $n; sleep {TICK_S}; done",
                background_after_s=TICK_S,
            )
            session = _Session(name, state, session.sandbox, job["job"]["id"], job["stdout"])
        made.append(session)
    return made


async def _run(http: httpx.AsyncClient, session: str, command: str, **fields: Any) -> Any:
    body = {"session": session, "command": command, **fields}
    answer = await http.post(f"{API_PREFIX}/run", json=body)
    if answer.status_code != 200:
        raise httpx.HTTPError(f"HTTP {answer.status_code}: {answer.text[:300]}")
    return answer.json()


async def _state(http: httpx.AsyncClient, session: _Session) -> str:
    """The session's state, read in its sandbox ("" when it answered from another one)."""
    answer = await _run(http, session.name, "cat /tmp/state")
    if answer["sandbox"] != session.sandbox:
        return ""
    return str(answer["stdout"]).strip()


async def _job_whole(http: httpx.AsyncClient, session: _Session, ticks: int, tally: _Tally) -> bool:
    """Whether the job ended and its output is whole: every tick, once, in order."""
    answer = await http.get(f"{API_PREFIX}/jobs/{session.job}", params={"wait_s": 60})
    job = answer.json()
    if answer.status_code != 200 or job["status"] != "completed":
        tally.problems.append(f"job {session.job}: {answer.text[:300]}")
        return False
    whole = session.shown + job["result"]["stdout"]
    expected = "".join(f"tick {n}\n" for n in range(1, ticks + 1))
    if whole != expected:
        tally.problems.append(f"job {session.job}'s output is not whole: {whole[-200:]!r}")
        return False
    return True


def _cpu_s(pid: int) -> float:
    """The CPU time (user and system) process `pid` has used, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command's name, utime and stime are the 12th and 13th fields.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kept(root: Path) -> set[str]:
    """The containers and volumes the state directory of `root` holds, by name."""
    kept = kept_id(root)
    client = docker_client()
    try:
        label = {"label": f"{LABEL_STATE}={kept}"}
        containers = {
            c.name for c in client.containers.list(all=True, filters=label, ignore_removed=True)
        }
        volumes = {v["Name"] for v in client.api.volumes(filters=label)["Volumes"] or []}
    finally:
        client.close()
    return containers | volumes


def _section(plan: Plan, ticks: int, tally: _Tally) -> Section:
    empty = Series(LISTENING_EMPTY, tuple(tally.listening_empty))
    kept = Series(LISTENING_KEPT.format(n=plan.restore_sessions), tuple(tally.listening_kept))
    first = Series(FIRST_ANSWER, tuple(tally.first_answer))
    after = Series(AFTER_LISTENING, tuple(tally.after_listening))
    cpu = Series(CPU_TO_FIRST, tuple(tally.cpu_to_first))
    rows = (
        ("start to listening", empty.label, str(len(empty.samples_s)), ms(empty.median_s), ""),
        (
            "start to listening",
            kept.label,
            str(len(kept.samples_s)),
            ms(kept.median_s),
            ratio(kept.median_s, empty.median_s) + " of nothing to take over",
        ),
        ("first answer", first.label, str(len(first.samples_s)), ms(first.median_s), ""),
        ("first answer", after.label, str(len(after.samples_s)), ms(after.median_s), ""),
        ("first answer", cpu.label, str(len(cpu.samples_s)), ms(cpu.median_s), "user + system"),
        (
            "answered",
            "sessions with their state, in their sandbox",
            str(tally.sessions),
            f"{tally.sessions_answered}/{tally.sessions}",
            "",
        ),
        (
            "answered",
            "jobs with their status and whole output",
            str(tally.jobs),
            f"{tally.jobs_answered}/{tally.jobs}",
            "",
        ),
        (
            "engine",
            "containers and volumes leaked / lost",
            "",
            f"{tally.leaked} / {tally.lost}",
            "",
        ),
    )
    everything = tally.sessions > 0 and tally.sessions_answered == tally.sessions
    jobs = tally.jobs > 0 and tally.jobs_answered == tally.jobs
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("figure", "what", "n", "median / count", "note"),
        rows=rows,
        groups=(SeriesGroup("A daemon's start, killed before", (empty, kept, first, after)),),
        targets=(
            Target(
                "100 % of sessions answered with their state after kill -9",
                f"{tally.sessions_answered}/{tally.sessions}",
                everything,
            ),
            Target(
                "100 % of jobs answered with their status and output after kill -9",
                f"{tally.jobs_answered}/{tally.jobs}",
                jobs,
            ),
            Target(
                "no container or volume leaked or lost",
                f"{tally.leaked} leaked, {tally.lost} lost",
                tally.leaked == 0 and tally.lost == 0 and tally.sessions > 0,
            ),
            Target(
                f"first request answered within {TARGET_FIRST_S:g} s of the daemon's start",
                ms(first.median_s),
                bool(first.samples_s) and first.median_s <= TARGET_FIRST_S,
            ),
        ),
        notes=(
            f"{plan.restore_iterations} rounds of {plan.restore_sessions} sessions, "
            f"{plan.restore_jobs} of them with a job printing {ticks} ticks {TICK_S:g} s apart; "
            f"the daemon killed (SIGKILL) and away {plan.restore_gap_s:g} s",
            "times from the new daemon's process start (Popen): until its socket accepts (bound "
            "before it takes anything over: connections wait in its backlog), and until the "
            "first session answered `cat /tmp/state` from its own sandbox; the daemon's CPU time "
            "until then, from /proc, does not depend on the machine's load",
        ),
        problems=tuple(tally.problems[:3]),
        raw={
            "sessions": tally.sessions,
            "sessions_answered": tally.sessions_answered,
            "jobs": tally.jobs,
            "jobs_answered": tally.jobs_answered,
            "leaked": tally.leaked,
            "lost": tally.lost,
        },
    )
