"""Family 1: one command's round trip, logos and sandboxd against the Docker baselines.

Every method runs the same commands through `bash -c` in the same image on the same engine.
Runs are interleaved: each iteration visits every method once per command, starting at a
different method each time, so that drift (other load, caches, the engine's state) hits all
methods alike. Cold methods (a new session, `docker run --rm`) take part in evenly spread
iterations only, because each of their samples costs a container.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.daemon import (
    BenchSetupError,
    check_image,
    docker_client,
    require_image,
    running_daemon,
)
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target, ms, ratio
from logos.options import ExecOptions
from logos.result import Result
from logos.runners.local import LocalRunner
from sandboxd.client.runner import SandboxRunner

FAMILY = "roundtrip"
TITLE = "Command round trip"
COMMANDS = ("true", "python3 -c pass")
TARGET_WARM_MS = 15.0
TARGET_WARM_SPEEDUP = 3.0
TARGET_COLD_RATIO = 1.2
BENCH_LABEL = "logos-bench"
"""On containers the benchmark starts itself (not through sandboxd)."""
RUN_LABEL = f"{BENCH_LABEL}={os.getpid()}"
"""The label those containers carry, valued with this run's process id: a run (or a test of
one) finds its own, whatever other runs share the engine."""

LOCAL = "LocalRunner (host bash)"
SANDBOX_WARM = "SandboxRunner, warm session"
SANDBOX_COLD = "SandboxRunner, new session"
DOCKER_EXEC = "docker exec (CLI)"
DOCKER_PY = "docker-py exec_run"
MINI_SWE = "mini-swe-agent DockerEnvironment"
DOCKER_RUN = "docker run --rm (CLI)"


class CommandFailed(Exception):
    """A method ran the command but it did not succeed."""


class Method(Protocol):
    label: str
    cold: bool

    async def once(self, command: str) -> float:
        """Run `command` once; the round trip in seconds. Raises CommandFailed."""
        ...

    async def close(self) -> None:
        """Let go of what the method holds; a class that subclasses Method explicitly and
        holds nothing of its own gets this one."""
        return None


def _check_result(result: Result) -> None:
    if not result.ok:
        raise CommandFailed(
            f"exit {result.exit_code}, signal {result.signal}, error {result.error!r}, "
            f"stderr {result.stderr[-300:]!r}"
        )


def _check_process(completed: subprocess.CompletedProcess[bytes]) -> None:
    if completed.returncode != 0:
        raise CommandFailed(f"exit {completed.returncode}: {completed.stderr[-300:]!r}")


class WarmRunnerMethod:
    """A logos runner kept across samples: the local runner, or one warm sandbox session."""

    cold = False

    def __init__(self, label: str, runner: LocalRunner | SandboxRunner) -> None:
        self.label = label
        self._runner = runner

    async def once(self, command: str) -> float:
        started = time.perf_counter()
        result = await self._runner.run(command, ExecOptions())
        elapsed = time.perf_counter() - started
        _check_result(result)
        return elapsed

    async def close(self) -> None:
        await self._runner.aclose()


class SandboxColdMethod(Method):
    """The first command of a new session: the daemon starts its container on demand."""

    label = SANDBOX_COLD
    cold = True

    def __init__(self, socket: os.PathLike[str]) -> None:
        self._socket = socket

    async def once(self, command: str) -> float:
        runner = SandboxRunner(self._socket, session=f"bench-cold-{uuid.uuid4().hex[:8]}")
        try:
            started = time.perf_counter()
            result = await runner.run(command, ExecOptions())
            elapsed = time.perf_counter() - started
        finally:
            await runner.aclose()  # removes the session's container: they must not pile up
        _check_result(result)
        return elapsed


# WHY the CLI and docker-py methods block the event loop: nothing else runs while a sample
# is taken, and handing the call to a worker thread would add a thread hop to the baseline.


class DockerCliMethod(Method):
    """One `docker` CLI process per command: `docker exec` into a running container, or a
    `docker run --rm` that pays a container per command."""

    def __init__(self, label: str, cold: bool, prefix: list[str]) -> None:
        self.label = label
        self.cold = cold
        self._prefix = prefix

    @classmethod
    def exec_into(cls, docker: str, container_id: str) -> DockerCliMethod:
        return cls(DOCKER_EXEC, False, [docker, "exec", container_id, "bash", "-c"])

    @classmethod
    def run_each(cls, docker: str, image: str) -> DockerCliMethod:
        prefix = [docker, "run", "--rm", "--network", "none", "--label", RUN_LABEL]
        return cls(DOCKER_RUN, True, [*prefix, image, "bash", "-c"])

    async def once(self, command: str) -> float:
        started = time.perf_counter()
        # Blocking on purpose: see the WHY above the class.
        completed = subprocess.run(  # noqa: ASYNC221
            [*self._prefix, command], capture_output=True, check=False
        )
        elapsed = time.perf_counter() - started
        _check_process(completed)
        return elapsed


def docker_run_baseline(image: str) -> DockerCliMethod:
    """`docker run --rm` of `image`, the cold families' baseline, once the CLI and the image
    are known to be there (else BenchSetupError)."""
    docker = shutil.which("docker")
    if docker is None:
        raise BenchSetupError("the docker CLI is not on PATH: install it (./scripts/setup-docker)")
    check_image(image)
    return DockerCliMethod.run_each(docker, image)


class DockerPyMethod(Method):
    label = DOCKER_PY
    cold = False

    def __init__(self, client: Any, container_id: str) -> None:
        self._container = client.containers.get(container_id)

    async def once(self, command: str) -> float:
        started = time.perf_counter()
        exit_code, output = self._container.exec_run(["bash", "-c", command])
        elapsed = time.perf_counter() - started
        if exit_code != 0:
            raise CommandFailed(f"exit {exit_code}: {output[-300:]!r}")
        return elapsed


class MiniSweAgentMethod:
    """mini-swe-agent's DockerEnvironment as its users get it: `docker exec ... bash -lc`."""

    label = MINI_SWE
    cold = False

    def __init__(self, docker: str, image: str) -> None:
        self._docker = docker
        # WHY a private config dir and a silent start: importing minisweagent creates its
        # global config directory and prints a banner; neither belongs in a benchmark.
        self._config_dir = tempfile.mkdtemp(prefix="bench-mswea-")
        os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = self._config_dir
        os.environ["MSWEA_SILENT_STARTUP"] = "1"
        try:
            from minisweagent.environments.docker import DockerEnvironment
        except ImportError:
            shutil.rmtree(self._config_dir, ignore_errors=True)
            raise BenchSetupError(
                "mini-swe-agent is not installed: install the bench extra "
                "(`pip install -e '.[bench]'`, or run ./scripts/bench)"
            ) from None
        try:
            self._env = DockerEnvironment(
                image=image,
                executable=docker,
                run_args=["--rm", "--network", "none", "--label", RUN_LABEL],
                logger=logging.getLogger("bench.minisweagent"),
            )
        except BaseException:
            shutil.rmtree(self._config_dir, ignore_errors=True)
            raise

    async def once(self, command: str) -> float:
        started = time.perf_counter()
        output = self._env.execute({"command": command})
        elapsed = time.perf_counter() - started
        if output["returncode"] != 0:
            raise CommandFailed(f"exit {output['returncode']}: {output['output'][-300:]!r}")
        return elapsed

    async def close(self) -> None:
        # WHY not its cleanup(): that stops the container in a background shell with a 10 s
        # grace; the next benchmark should start on a quiet engine.
        container_id, self._env.container_id = self._env.container_id, None
        if container_id:
            _remove_container(self._docker, container_id)
        shutil.rmtree(self._config_dir, ignore_errors=True)


@dataclass
class _Tally:
    samples: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in COMMANDS})
    failures: list[str] = field(default_factory=list)


def cold_schedule(iterations: int, cold_iterations: int) -> set[int]:
    """The iterations in which the cold methods take a sample: spread evenly."""
    count = min(iterations, cold_iterations)
    return {k * iterations // count for k in range(count)}


async def sample_all(
    methods: Sequence[Method], iterations: int, cold_iterations: int
) -> dict[str, _Tally]:
    tallies = {method.label: _Tally() for method in methods}
    for method in methods:  # one unmeasured round: page cache, image layers, bash, python
        for command in COMMANDS:
            await _sample(method, command, None)
    cold_at = cold_schedule(iterations, cold_iterations)
    for iteration in range(iterations):
        active = [m for m in methods if not m.cold or iteration in cold_at]
        shift = iteration % len(active)
        for command in COMMANDS:
            for method in active[shift:] + active[:shift]:
                await _sample(method, command, tallies[method.label])
    return tallies


async def sample_rotating(
    samplers: Mapping[str, Callable[[], Awaitable[float]]],
    iterations: int,
    samples: Mapping[str, list[float]],
    failures: list[str],
    after_warm_up: Callable[[], None] | None = None,
) -> None:
    """Each sampler `iterations` times into `samples`, after one unmeasured round, their order
    rotating every round (so that none always runs right after another); a CommandFailed is
    a failure. `after_warm_up` resets what the samplers themselves tallied in that round."""
    labels = list(samplers)
    for iteration in range(iterations + 1):
        shift = iteration % len(labels)
        for label in labels[shift:] + labels[:shift]:
            try:
                elapsed = await samplers[label]()
            except CommandFailed as exc:
                failures.append(f"{label}: {exc}")
                continue
            if iteration > 0:
                samples[label].append(elapsed)
        if iteration == 0 and after_warm_up is not None:
            after_warm_up()


async def _sample(method: Method, command: str, tally: _Tally | None) -> None:
    try:
        elapsed = await method.once(command)
    except CommandFailed as exc:
        if tally is not None:
            tally.failures.append(f"{method.label}: `{command}` failed: {exc}")
        return
    if tally is not None:
        tally.samples[command].append(elapsed)


async def run(plan: Plan) -> Section:
    docker = shutil.which("docker")
    if docker is None:
        raise BenchSetupError("the docker CLI is not on PATH: install it (./scripts/setup-docker)")
    client = docker_client()
    require_image(client, plan.image)
    problems: list[str] = []
    methods: list[Method] = []
    container_id = _start_idle_container(docker, plan.image)
    try:
        with running_daemon(plan.image) as daemon:
            methods += [
                WarmRunnerMethod(LOCAL, LocalRunner()),
                WarmRunnerMethod(
                    SANDBOX_WARM,
                    SandboxRunner(daemon.socket, session=f"bench-warm-{uuid.uuid4().hex[:8]}"),
                ),
                SandboxColdMethod(daemon.socket),
                DockerCliMethod.exec_into(docker, container_id),
                DockerPyMethod(client, container_id),
            ]
            try:
                methods.append(MiniSweAgentMethod(docker, plan.image))
            except (BenchSetupError, subprocess.SubprocessError) as exc:
                problems.append(f"{MINI_SWE} left out: {exc}")
            methods.append(DockerCliMethod.run_each(docker, plan.image))
            try:
                tallies = await sample_all(methods, plan.roundtrip_iterations, plan.cold_iterations)
            finally:
                for method in methods:
                    await method.close()
    finally:
        _remove_container(docker, container_id)
        client.close()
    for tally in tallies.values():
        problems += tally.failures[:3]
        if len(tally.failures) > 3:
            problems.append(f"... and {len(tally.failures) - 3} more failures of that method")
    return _section(plan, [m.label for m in methods], tallies, problems)


def _start_idle_container(docker: str, image: str) -> str:
    """The running container that `docker exec` and docker-py `exec_run` go into."""
    completed = subprocess.run(
        [
            *(docker, "run", "-d", "--rm", "--init", "--network", "none"),
            *("--label", RUN_LABEL, image, "sleep", "infinity"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise BenchSetupError(
            f"`docker run -d {image}` failed ({completed.stderr.strip()}): check the engine"
        )
    return completed.stdout.strip()


def _remove_container(docker: str, container_id: str) -> None:
    subprocess.run([docker, "rm", "-f", container_id], capture_output=True, check=False)


def _section(
    plan: Plan, labels: list[str], tallies: dict[str, _Tally], problems: list[str]
) -> Section:
    def median(label: str, command: str) -> float:
        return Series(label, tuple(tallies[label].samples[command])).median_s

    rows: list[tuple[str, ...]] = []
    groups: list[SeriesGroup] = []
    targets: list[Target] = []
    for command in COMMANDS:
        exec_median = median(DOCKER_EXEC, command)
        run_median = median(DOCKER_RUN, command)
        group: list[Series] = []
        for label in labels:
            series = Series(label, tuple(tallies[label].samples[command]))
            group.append(series)
            rows.append(
                (
                    f"`{command}`",
                    label,
                    f"{len(series.samples_s)}",
                    ms(series.median_s),
                    ms(series.p95_s),
                    ratio(series.median_s, exec_median),
                    ratio(series.median_s, run_median),
                )
            )
        groups.append(SeriesGroup(f"Round trip: `{command}`", tuple(group)))
        warm = median(SANDBOX_WARM, command)
        cold = median(SANDBOX_COLD, command)
        if command == COMMANDS[0]:
            targets.append(
                Target(
                    f"sandbox warm round trip median <= {TARGET_WARM_MS:g} ms (`{command}`)",
                    ms(warm),
                    warm * 1000 <= TARGET_WARM_MS,
                )
            )
        speedup = exec_median / warm
        targets.append(
            Target(
                f"sandbox warm >= {TARGET_WARM_SPEEDUP:g}x faster than docker exec (`{command}`)",
                f"{speedup:.1f}x faster ({ms(warm)} vs {ms(exec_median)})",
                speedup >= TARGET_WARM_SPEEDUP,
            )
        )
        targets.append(
            Target(
                f"sandbox cold <= {TARGET_COLD_RATIO:g}x docker run --rm (`{command}`)",
                f"{cold / run_median:.2f}x ({ms(cold)} vs {ms(run_median)})",
                cold / run_median <= TARGET_COLD_RATIO,
            )
        )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("command", "method", "n", "median", "p95", "vs docker exec", "vs docker run"),
        rows=tuple(rows),
        groups=tuple(groups),
        targets=tuple(targets),
        notes=(
            f"{plan.roundtrip_iterations} interleaved iterations per warm method, "
            f"{plan.cold_iterations} per cold method (new session / docker run --rm); image "
            f"{plan.image}; every method runs `bash -c` (mini-swe-agent: `bash -lc`, its "
            "default); ratios are median / baseline median (below 1 is faster)",
            f"LocalRunner's python3 is the host's: {shutil.which('python3') or 'not on PATH'}",
        ),
        problems=tuple(problems),
    )
