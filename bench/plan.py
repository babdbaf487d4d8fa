"""How much work each family does: the full run, `--quick`, and `-n`."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

DEFAULT_IMAGE = os.environ.get("SANDBOXD_IMAGE", "logos-sandbox:latest")


@dataclass(frozen=True)
class Plan:
    """Iteration counts and sizes; the defaults fit a few minutes on a 2-core machine."""

    image: str = DEFAULT_IMAGE
    roundtrip_iterations: int = 30
    """Interleaved round trips per warm method and command."""
    cold_iterations: int = 10
    """First commands of new sessions / `docker run --rm` per command."""
    throughput_levels: tuple[int, ...] = (1, 8, 32, 64)
    """Concurrent sessions through one daemon."""
    throughput_duration_s: float = 3.0
    loop_steps: int = 200
    loop_runs: int = 3
    parser_message_bytes: int = 1_000_000
    parser_repeats: int = 7
    overlap_repeats: int = 3
    overlap_tokens: int = 150
    """Length of the slow reply, in tokens (4 characters each)."""
    overlap_tokens_per_s: float = 50.0
    overlap_command: str = "sleep 1"
    flood_bytes: int = 2**30
    control_flood_bytes: int = 20_000_000
    """Per request of the control-character flood (at the largest max_output_bytes)."""
    control_flood_requests: int = 8
    """Control-character floods sent at once, each in its own session."""
    prepare_iterations: int = 10
    """Interleaved samples of a run's first command (with and without preparation), of a
    new session's start and of `docker run --rm`."""
    prepare_model_delay_s: float = 0.5
    """The scripted model's time to its first block."""
    prepare_slow_model_delay_s: float = 2.0
    """A slower model's, long enough for a container's start on a loaded machine."""
    prepare_sessions: int = 64
    """Sessions started at once."""
    pool_iterations: int = 20
    """Interleaved new-session starts with a warm pool, without, and `docker run --rm`."""
    pool_sessions: int = 64
    """The warm pool's size, and the sessions started at once from it (and without it)."""
    pool_switch_rounds: int = 5
    """Rounds of the pool_switch family: on each daemon, a spec's starts, then another's."""
    pool_switch_starts: int = 6
    """New sessions of each spec per round, back to back."""
    pool_switch_runtime_starts: int = 10
    """Bare container starts per OCI runtime."""
    fork_mb: int = 200
    """Changes (MB of /tmp) of the session the fork family forks."""
    fork_into: int = 8
    fork_iterations: int = 3
    serve_latency_events: int = 400
    """Deltas whose way from the model to an SSE client is timed."""
    serve_concurrent_runs: int = 50
    serve_idle_runs: int = 50
    """Runs left waiting for an approval, to measure the server's memory per run."""
    projects_history: int = 1000
    """Messages in the project's chat before the measured ones (half the person's)."""
    projects_messages: int = 100
    """Measured messages, and plain runs as their baseline."""
    projects_agents: int = 10
    batch_tasks: int = 200
    """Tasks of `logos batch` with local bash, at each worker count and on Ray."""
    batch_workers: tuple[int, ...] = (1, 8, 32)
    batch_sandbox_tasks: int = 40
    """Tasks with the sandbox (each starts a container), at each worker count."""
    batch_sandbox_workers: tuple[int, ...] = (1, 8)
    batch_rounds: int = 4
    """Each level's tasks in this many rounds, a batch and its baseline in turn first."""
    page_loads: int = 12
    """Times the workspace page is opened afresh to time its load and first paint."""
    page_steps: int = 1000
    """Model turns of the saved run the page draws, each with one command."""
    page_output_bytes: int = 10_000_000
    """Their commands' output, in all."""
    small_models: tuple[str, ...] = ("qwen2.5-coder-0.5b", "gemma3-270m", "smollm2")
    """Models of the small-task suite, as `scripts/fetch-model` names them."""
    small_model_tries: int = 3
    """Tries of each task with logos's defaults, on the main model (the 0.5B)."""
    small_model_other_tries: int = 1
    """Tries of each task on the other models (reported, no target)."""
    small_model_tasks: int = 0
    """The suite's first N tasks only (0: all of them)."""
    small_model_baselines: bool = True
    """The ablation and mini-swe-agent rows, on the main model."""
    first_question_tries: int = 3
    """Tries of each first question with logos's defaults (the baselines once each)."""
    first_question_count: int = 0
    """The first-question suite's first N questions only (0: all of them)."""
    first_question_baselines: bool = True
    """The mini-swe-agent and README-pasted rows."""
    first_question_other_models: tuple[str, ...] = ("qwen2.5-coder-1.5b",)
    """Models asked each first question once too, with logos's defaults (reported, no
    target): the larger model the default is chosen against."""
    local_models: tuple[str, ...] = (
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-1.5b",
        "gemma3-270m",
        "smollm2",
    )
    """Models the localmodel family loads and runs (the default first)."""
    egress_rounds: int = 10
    """Alternating rounds of GETs through the egress proxy and with the network on."""
    egress_requests: int = 20
    """GETs per round, each on a new connection."""
    egress_download_bytes: int = 256 * 2**20
    """The large body each sandbox downloads once."""
    restore_sessions: int = 20
    """Sessions a killed daemon leaves to the next one (each with a state of its own)."""
    restore_jobs: int = 10
    """Of them, sessions with a job running through the restart."""
    restore_iterations: int = 3
    """Rounds: a daemon killed and started again, each on sessions of its own."""
    restore_gap_s: float = 2.0
    """How long no daemon runs between the kill and the new one's start."""
    temenos_callers: int = 200
    """Sequential temenos runs, each with a new caller id (as every `logos exec --sandbox
    temenos` has); 1000 takes about half an hour on a 2-core machine."""
    start_iterations: int = 9
    """Starts of each program the start family times."""
    start_warm_up: bool = True
    """One unmeasured start of each first, so that its bytecode is cached."""
    settle_max_s: float = 30.0
    """Longest wait, before each family, for the machine to be quiet (0: start at once)."""

    @classmethod
    def quick(cls, image: str = DEFAULT_IMAGE) -> Plan:
        """Every family, small: proves the harness works, not the numbers."""
        return cls(
            image=image,
            roundtrip_iterations=5,
            cold_iterations=2,
            throughput_levels=(1, 4),
            throughput_duration_s=0.5,
            loop_steps=30,
            loop_runs=1,
            parser_message_bytes=200_000,
            parser_repeats=2,
            overlap_repeats=1,
            overlap_tokens=50,
            overlap_command="sleep 0.3",
            flood_bytes=64 * 2**20,
            control_flood_requests=2,
            prepare_iterations=2,
            prepare_sessions=4,
            pool_iterations=2,
            pool_sessions=4,
            pool_switch_rounds=1,
            pool_switch_starts=4,
            pool_switch_runtime_starts=2,
            fork_mb=5,
            fork_into=2,
            fork_iterations=1,
            serve_latency_events=50,
            serve_concurrent_runs=8,
            serve_idle_runs=8,
            projects_history=100,
            projects_messages=10,
            batch_tasks=6,
            batch_workers=(1, 4),
            batch_sandbox_tasks=3,
            batch_sandbox_workers=(1, 2),
            batch_rounds=1,
            page_loads=4,
            page_steps=100,
            page_output_bytes=1_000_000,
            small_models=("smollm2",),
            small_model_tries=1,
            small_model_other_tries=1,
            small_model_tasks=3,
            small_model_baselines=False,
            first_question_tries=1,
            first_question_count=2,
            first_question_baselines=False,
            first_question_other_models=(),
            local_models=("smollm2",),
            temenos_callers=6,
            egress_rounds=2,
            egress_requests=5,
            egress_download_bytes=8 * 2**20,
            restore_sessions=4,
            restore_jobs=2,
            restore_iterations=1,
            restore_gap_s=1.0,
            start_iterations=3,
        )

    @classmethod
    def smoke(cls, image: str = DEFAULT_IMAGE) -> Plan:
        """Each family at the least work that still runs every part of it and reports, with
        no wait for a quiet machine: the test suite's size (its figures mean nothing)."""
        return dataclasses.replace(
            cls.quick(image),
            settle_max_s=0.0,
            prepare_iterations=1,
            prepare_slow_model_delay_s=1.0,
            prepare_sessions=2,
            pool_iterations=1,
            pool_sessions=2,
            pool_switch_starts=3,  # the pool_switch target reads the third start
            pool_switch_runtime_starts=1,
            batch_workers=(1,),
            temenos_callers=3,
            egress_rounds=1,
            restore_sessions=2,  # one with a job, one without
            restore_jobs=1,
            restore_gap_s=0.5,
            start_iterations=1,
            start_warm_up=False,
        )

    def with_iterations(self, iterations: int) -> Plan:
        """`-n`: round trips per method; cold samples (new sessions, `docker run --rm`, a
        run's first command) are a third of that (at least one)."""
        if iterations < 1:
            raise ValueError(f"-n must be at least 1, got {iterations}")
        return dataclasses.replace(
            self,
            roundtrip_iterations=iterations,
            cold_iterations=max(1, round(iterations / 3)),
            prepare_iterations=max(1, round(iterations / 3)),
            pool_iterations=max(1, round(iterations / 3)),
        )
