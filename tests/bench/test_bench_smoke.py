"""The benchmark harness itself works: tiny runs of `python -m bench`, real parts throughout.

Speed targets are not asserted here (they belong to bench/, and a loaded CI machine would
flake); what is asserted is that every family runs, counts what it should, and reports.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import FAMILIES
from bench.batch import SANDBOX_POOLED, SANDBOX_PREPARED, split
from bench.egress import DIRECT as EGRESS_DIRECT, PROXY as EGRESS_PROXY
from bench.mcp import MCP_HTTP, MCP_STDIO, NATIVE as MCP_NATIVE
from bench.plan import Plan
from bench.pool_switch import NO_POOL, PHASES, RUNTIMES
from bench.ray_cluster import ray_command
from bench.report import render_table, write_json
from bench.results import Section, Target, percentile
from bench.roundtrip import (
    BENCH_LABEL,
    COMMANDS,
    DOCKER_EXEC,
    DOCKER_PY,
    DOCKER_RUN,
    LOCAL,
    MINI_SWE,
    SANDBOX_COLD,
    SANDBOX_WARM,
    cold_schedule,
)
from tests.support.parts import require
from tests.support.processes import interrupt, run_module, running

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return run_module("bench", *args, cwd=REPO, timeout=timeout)


def require_bench_extra(*modules: str) -> None:
    for module in modules:
        require(
            importlib.util.find_spec(module) is not None,
            f"{module} is missing: install the bench extra (pip install -e '.[bench]')",
        )


def smoke_section(
    family: str, out: Path, *, timeout: float = 280, shows: tuple[str, ...] = ()
) -> dict[str, Any]:
    """`--smoke --only FAMILY`, which must run cleanly and print each of `shows` in its table:
    the family's section of the results."""
    completed = run_bench("--smoke", "--only", family, "--out", str(out), timeout=timeout)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    for text in shows:
        assert text in completed.stdout, completed.stdout
    section: dict[str, Any] = load_results(out)["sections"][family]
    assert section["problems"] == []
    return section


def load_results(out: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((out / "results.json").read_text())
    return document


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([7.0], 95) == 7.0


def test_cold_samples_are_spread_over_the_iterations() -> None:
    assert cold_schedule(30, 10) == {0, 3, 6, 9, 12, 15, 18, 21, 24, 27}
    assert cold_schedule(2, 5) == {0, 1}


def test_the_smoke_plan_is_the_quick_one_at_most_and_waits_for_nothing() -> None:
    quick, smoke = Plan.quick(), Plan.smoke()
    assert smoke.settle_max_s == 0 < quick.settle_max_s
    for field in dataclasses.fields(Plan):
        value, smaller = getattr(quick, field.name), getattr(smoke, field.name)
        if isinstance(value, tuple) and all(isinstance(count, int) for count in value):
            assert len(smaller) <= len(value) and sum(smaller) <= sum(value), field.name
        elif isinstance(value, int | float) and not isinstance(value, bool):
            assert smaller <= value, field.name


def test_the_table_says_miss_plainly() -> None:
    section = Section(
        "demo",
        "Demo",
        ("method", "median"),
        (("fast one", "1.00 ms"),),
        targets=(Target("demo <= 0.5 ms", "1.00 ms", passed=False),),
    )
    machine = {
        "cpu_count": 2,
        "cpu_model": "cpu",
        "kernel": "k",
        "python": "3.11",
        "docker": {"server": None},
        "load_average": [0.0, 0.0, 0.0],
        "commit": None,
        "uncommitted_changes": False,
    }
    table = render_table([section], machine)
    assert "MISS  demo <= 0.5 ms  1.00 ms" in table
    assert "0 of 1 targets met; MISSED: 1" in table
    without_targets = render_table([dataclasses.replace(section, targets=())], machine)
    assert "no targets in the parts that ran" in without_targets


def test_the_json_file_holds_null_for_a_figure_that_is_not_a_number(tmp_path: Path) -> None:
    section = Section(
        "demo", "Demo", ("method",), (("m",),), raw={"p95_s": math.nan, "where": tmp_path}
    )
    path = tmp_path / "results.json"
    write_json(path, [section], {"cpu_count": 2}, {"plan": {"spread": [math.inf, 1.0]}})
    document = json.loads(path.read_text())
    assert document["sections"]["demo"]["raw"] == {"p95_s": None, "where": str(tmp_path)}
    assert document["plan"]["spread"] == [None, 1.0]


def test_unknown_family_is_a_usage_error_that_lists_the_choices() -> None:
    completed = run_bench("--only", "roundtrip,nonsense", timeout=60)
    assert completed.returncode == 2
    assert "unknown benchmark nonsense" in completed.stderr
    names = list(FAMILIES)
    assert f"choose from {','.join(names)}" in completed.stderr
    assert names[:3] == ["roundtrip", "throughput", "loop"] and "temenos" in names


@pytest.mark.timeout(180)
def test_loop_parser_overlap_and_start_families_run_and_report(tmp_path: Path) -> None:
    require_bench_extra("matplotlib", "minisweagent")
    completed = run_bench(
        "--smoke", "--only", "loop,parser,overlap,start", "--out", str(tmp_path), timeout=170
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    plan = Plan.smoke()

    assert "Agent loop overhead per step" in completed.stdout
    assert "Targets" in completed.stdout
    assert "loop overhead < 1 ms/step" in completed.stdout
    results = load_results(tmp_path)
    assert results["machine"]["cpu_count"] >= 1
    assert results["plan"]["loop_steps"] == plan.loop_steps

    loop = results["sections"]["loop"]
    for label in ("no-op runner", "LocalRunner"):
        assert len(loop["raw"][label]["step_s"]) == plan.loop_steps * plan.loop_runs
        assert len(loop["raw"][label]["runner_s"]) == plan.loop_steps * plan.loop_runs
    assert all(t >= 0 for t in loop["raw"]["no-op runner"]["runner_s"])

    parser = results["sections"]["parser"]
    assert parser["problems"] == []  # every block of the message was found
    assert all(rate > 0 for rate in parser["raw"]["20-char deltas"]["mb_per_s"])

    overlap = results["sections"]["overlap"]
    (streaming,) = overlap["raw"]["streaming"]
    (batch,) = overlap["raw"]["batch"]
    # Three concurrent `sleep 0.3` after a ~1 s stream: the baseline cannot beat their sum.
    assert batch["wall_s"] >= batch["generation_s"] + 0.3
    assert streaming["commands_sum_s"] >= 0.9

    start = results["sections"]["start"]
    assert start["problems"] == []  # mini-swe-agent's command is there too
    for label, figures in start["raw"].items():
        assert len(figures["wall_s"]) == plan.start_iterations, label
        assert all(cpu > 0 for cpu in figures["cpu_s"]), label
    python, libraries = (start["raw"][label]["cpu_s"][0] for label in list(start["raw"])[:2])
    assert python < libraries  # the interpreter alone is the floor of every row
    assert "logos TASK (two turns, a local OpenAI-compatible server)" in completed.stdout

    assert (tmp_path / "latency.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "table.txt").read_text().strip() in completed.stdout


@pytest.mark.timeout(170)
def test_serve_family_runs_and_reports(tmp_path: Path) -> None:
    require_bench_extra("matplotlib", "starlette", "uvicorn")
    serve = smoke_section("serve", tmp_path, timeout=150, shows=("event latency median ≤ 2 ms",))
    plan = Plan.smoke()
    raw = serve["raw"]
    assert len(raw["latency_s"]) == plan.serve_latency_events
    assert all(0 < latency < 5 for latency in raw["latency_s"])
    assert len(raw["run_s"]) == plan.serve_concurrent_runs  # every run reached `done`
    assert raw["idle_rss_after"] > 0 and raw["idle_rss_before"] > 0


@pytest.mark.timeout(170)
def test_projects_family_runs_and_reports(tmp_path: Path) -> None:
    require_bench_extra("matplotlib", "starlette", "uvicorn")
    projects = smoke_section(
        "projects", tmp_path, timeout=150, shows=("message → routing event (to the captain)",)
    )
    plan = Plan.smoke()
    raw = projects["raw"]
    for key in ("route", "delta", "turn", "plain"):
        assert len(raw[key]) == plan.projects_messages, key  # every turn was answered
    assert len(raw["fresh_delta"]) == plan.projects_agents - 1
    assert all(
        route <= delta <= turn
        for route, delta, turn in zip(raw["route"], raw["delta"], raw["turn"], strict=True)
    )


@pytest.mark.docker
@pytest.mark.timeout(420)
def test_docker_families_run_against_the_real_engine(tmp_path: Path, docker_client: Any) -> None:
    require_bench_extra("matplotlib", "minisweagent")
    completed = run_bench(
        "--smoke",
        "-n",
        "2",
        "--only",
        "roundtrip,throughput,flood",
        "--out",
        str(tmp_path),
        timeout=400,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = load_results(tmp_path)
    assert results["machine"]["docker"]["server"]

    roundtrip = results["sections"]["roundtrip"]
    assert roundtrip["problems"] == []
    for command in COMMANDS:
        samples = roundtrip["samples_s"][f"Round trip: `{command}`"]
        for label in (LOCAL, SANDBOX_WARM, DOCKER_EXEC, DOCKER_PY, MINI_SWE):
            assert len(samples[label]) == 2, (label, samples)
        for label in (SANDBOX_COLD, DOCKER_RUN):
            assert len(samples[label]) == 1, (label, samples)
    assert {t["goal"] for t in roundtrip["targets"]} >= {
        "sandbox warm round trip median <= 15 ms (`true`)",
        "sandbox cold <= 1.2x docker run --rm (`true`)",
    }

    levels = results["sections"]["throughput"]["raw"]["levels"]
    assert [level["sessions"] for level in levels] == list(Plan.smoke().throughput_levels)
    for level in levels:
        assert level["errors"] == []
        assert level["commands_per_s"] > 0
        assert level["daemon_rss_peak_bytes"] >= level["daemon_rss_before_bytes"] > 0

    flood = results["sections"]["flood"]
    assert flood["problems"] == []  # every byte was accounted for, kept or dropped
    written = flood["raw"]["bytes"]
    local = flood["raw"]["local"]
    assert local["peak_bytes"] - local["baseline_bytes"] < written / 2
    for process in flood["raw"]["sandbox"]:
        assert 0 < process["baseline_bytes"] <= process["peak_bytes"]
        assert process["peak_bytes"] - process["baseline_bytes"] < written / 2
    control = flood["raw"]["control"]
    assert control["requests"] == Plan.smoke().control_flood_requests
    assert 0 < control["baseline_bytes"] <= control["peak_bytes"]
    assert control["after_bytes"] <= control["peak_bytes"]
    # The replies' memory went back: what the daemon keeps is not their 6x JSON.
    assert control["after_bytes"] - control["baseline_bytes"] < 64 * 2**20

    leftovers = docker_client.containers.list(
        all=True, filters={"label": results["container_label"]}, ignore_removed=True
    )
    assert leftovers == []
    assert (tmp_path / "latency.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_the_egress_family_compares_the_proxy_with_the_network_on(
    tmp_path: Path, docker_client: Any
) -> None:
    require_bench_extra("matplotlib")
    egress = smoke_section("egress", tmp_path)  # no problem: each download got every byte
    smoke = Plan.smoke()
    samples = egress["samples_s"]["HTTP GET on a new connection, timed in the sandbox"]
    assert sorted(samples) == [EGRESS_PROXY, EGRESS_DIRECT]
    for label in (EGRESS_PROXY, EGRESS_DIRECT):
        assert len(samples[label]) == smoke.egress_rounds * smoke.egress_requests
        assert egress["raw"]["download"][label]["bytes"] == smoke.egress_download_bytes
    assert len(egress["targets"]) == 2


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_prepare_family_runs_against_the_real_engine(tmp_path: Path, docker_client: Any) -> None:
    plan = Plan.smoke()
    section = smoke_section("prepare", tmp_path)
    first = section["samples_s"]["A run's first command: block closed → result"]
    starts = section["samples_s"]["New session start"]
    assert [len(series) for series in first.values()] == [plan.prepare_iterations] * 3
    assert [len(series) for series in starts.values()] == [plan.prepare_iterations] * 2
    # The daemon timed each step of every measured start.
    steps = section["raw"]["steps_s"]
    assert list(steps) == ["image", "control_dir", "create", "start", "handshake"]
    assert all(len(samples) == plan.prepare_iterations for samples in steps.values())
    assert section["raw"]["many"] == {
        "sessions": plan.prepare_sessions,
        "wall_s": section["raw"]["many"]["wall_s"],
        "errors": [],
    }
    goals = {target["goal"] for target in section["targets"]}
    assert "first command with preparation <= 15 ms (model 0.5 s to its first block)" in goals
    assert "new session start <= 120 ms" in goals
    label = load_results(tmp_path)["container_label"]
    assert (
        docker_client.containers.list(all=True, filters={"label": label}, ignore_removed=True) == []
    )


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_mcp_family_times_the_run_tool_beside_the_native_api(
    tmp_path: Path, docker_client: Any
) -> None:
    section = smoke_section("mcp", tmp_path)
    samples = section["samples_s"]["Round trip through MCP: `true`"]
    assert list(samples) == [MCP_NATIVE, MCP_STDIO, MCP_HTTP]
    assert [len(series) for series in samples.values()] == [Plan.smoke().roundtrip_iterations] * 3


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_pool_family_runs_against_the_real_engine(tmp_path: Path, docker_client: Any) -> None:
    plan = Plan.smoke()
    section = smoke_section("pool", tmp_path)
    assert section["raw"]["missed"] == 0, "every pooled start found a warm sandbox"
    starts = section["samples_s"]["New session start, warm pool"]
    assert [len(series) for series in starts.values()] == [plan.pool_iterations] * 3
    bursts = section["raw"]["bursts"]
    assert [burst["errors"] for burst in bursts.values()] == [[], []]
    goals = {target["goal"] for target in section["targets"]}
    assert "new session from the warm pool <= 0.3x docker run --rm" in goals


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_pool_switch_family_runs_against_the_real_engine(
    tmp_path: Path, docker_client: Any
) -> None:
    plan = Plan.smoke()
    section = smoke_section("pool_switch", tmp_path)
    hits = section["raw"]["hits"]
    assert len(hits) == 3 * len(PHASES)
    assert all(len(rounds) == plan.pool_switch_rounds for rounds in hits.values())
    assert all(len(starts) == plan.pool_switch_starts for r in hits.values() for starts in r)
    for phase in PHASES:
        assert not any(any(starts) for starts in hits[f"{NO_POOL}: {phase}"]), "never warm"
    assert {"create", "start", "handshake"} <= set(section["raw"]["steps_s"])
    rows = section["table"]["rows"]
    runtimes = [row for row in rows if row[0] == "bare container start"]
    assert [row[1].removeprefix("docker start, ") for row in runtimes] == list(RUNTIMES)
    goals = [target["goal"] for target in section["targets"]]
    assert goals == [
        "pool of 4: the spec switched to is served warm by its start #3",
        "pool of 4, memory for 2: the spec switched to is served warm by its start #3",
    ]


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_fork_family_runs_against_the_real_engine(tmp_path: Path, docker_client: Any) -> None:
    section = smoke_section("fork", tmp_path)  # no problem: every fork held the source's changes
    plan = Plan.smoke()
    series = section["samples_s"][f"Fork of {plan.fork_mb} MB of changes"]
    assert [len(samples) for samples in series.values()] == [plan.fork_iterations] * 3
    assert section["raw"] == {"mb": plan.fork_mb, "into": plan.fork_into}


def test_restore_family_answers_every_session_and_job(tmp_path: Path, docker_client: Any) -> None:
    section = smoke_section("restore", tmp_path)
    plan = Plan.smoke()
    sessions = plan.restore_sessions * plan.restore_iterations
    jobs = plan.restore_jobs * plan.restore_iterations
    assert section["raw"] == {
        "sessions": sessions,
        "sessions_answered": sessions,
        "jobs": jobs,
        "jobs_answered": jobs,
        "leaked": 0,
        "lost": 0,
    }


def children_of(parent: int, marker: bytes) -> list[int]:
    """Live processes whose parent is `parent` and whose command line holds `marker`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue  # it ended while we looked
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if int(ppid) == parent and state != "Z" and marker in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_ctrl_c_removes_the_daemon_and_containers_it_started(
    tmp_path: Path, docker_client: Any
) -> None:
    require_bench_extra("minisweagent")
    args = ["--smoke", "--only", "roundtrip", "-n", "200", "--out", str(tmp_path)]
    with running([sys.executable, "-m", "bench", *args], REPO) as bench:
        # Wait until the family runs: its daemon serves and its containers exist.
        deadline = time.monotonic() + 120
        daemons: list[int] = []
        while time.monotonic() < deadline and bench.poll() is None:
            daemons = children_of(bench.pid, b"sandboxd")
            labelled = docker_client.containers.list(
                filters={"label": f"{BENCH_LABEL}={bench.pid}"}, ignore_removed=True
            )
            if daemons and len(labelled) >= 2:  # the docker exec target and mini-swe-agent's
                break
            time.sleep(0.2)
        assert daemons, "the benchmark never started its daemon"
        time.sleep(1)
        _, stderr = interrupt(bench, signal.SIGINT, timeout=150)
    assert bench.returncode == 130, stderr[-3000:]
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert not (tmp_path / "results.json").exists()
    labelled = docker_client.containers.list(
        all=True, filters={"label": f"{BENCH_LABEL}={bench.pid}"}, ignore_removed=True
    )
    assert labelled == []
    assert all(not Path(f"/proc/{pid}").exists() for pid in daemons), "the daemon survived"


def test_a_level_s_tasks_are_split_into_nearly_equal_rounds() -> None:
    assert split(200, 4) == [50, 50, 50, 50]
    assert split(7, 3) == [3, 2, 2]
    assert split(2, 4) == [1, 1]


@pytest.mark.docker
@pytest.mark.timeout(420)
def test_the_batch_family_runs_every_level(tmp_path: Path, docker_client: Any) -> None:
    require(ray_command().exists(), "Ray is not installed: pip install 'logos[ray]'")
    section = smoke_section("batch", tmp_path, timeout=400)
    plan = Plan.smoke()
    levels = section["raw"]["levels"]
    assert [(level["where"], level["workers"]) for level in levels] == [
        *(("local", workers) for workers in plan.batch_workers),
        *(("sandbox", workers) for workers in plan.batch_sandbox_workers),
        (SANDBOX_PREPARED, max(plan.batch_sandbox_workers)),
        *((SANDBOX_POOLED, workers) for workers in plan.batch_sandbox_workers),
        ("ray", 2),
    ]
    for level in levels:
        assert level["errors"] == []
        assert level["passed"] == level["tasks"]
        assert sum(level["tasks_per_node"].values()) == level["tasks"]
        assert level["elapsed_s"] > 0 and level["baseline_s"] > 0
        assert level["peak_rss_bytes"] > 0
    ray = levels[-1]
    assert len(ray["tasks_per_node"]) == 2, "every task ran on one node of the two"
    assert {t["goal"] for t in section["targets"]} == {
        "local, 1 worker: harness overhead ≤ 50 ms/task",
        "sandbox, 1 worker: harness overhead ≤ 50 ms/task",
        f"sandbox, {max(plan.batch_sandbox_workers)} workers: ≥ 5 tasks/s",
        f"{SANDBOX_POOLED}, {max(plan.batch_sandbox_workers)} workers: ≥ 5 tasks/s",
    }
