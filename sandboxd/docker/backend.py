"""DockerBackend: sessions of warm, hardened containers that run commands in milliseconds.

A session's first command starts a container whose main process is the supervisor
(sandboxd.inside.supervisor); every later command of that session (with the same SandboxSpec) is a
JSON line over the supervisor's one connection, with no Docker API call and no thread.
A command still running at its background threshold goes on as a job (sandboxd.docker.job).
Images without python3 fall back to `docker exec` (sandboxd.docker.exec_fallback), which
runs every command to its end.

Sandboxes outlive the daemon when it keeps them (sandboxd.docker.keeping): the next daemon on
the same state directory takes them over, their jobs with them, and tells the sessions whose
sandbox did not make it why. Orphans: see sandboxd.docker.ownership for the rule that lets
several daemons share one engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import secrets
import stat
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import docker.errors

from logos.closing import AsyncCloseable
from logos.errors import RecordFileError
from logos.result import Result
from sandboxd.api import SESSION_LOST
from sandboxd.backend import (
    AdoptedJobs,
    BackendError,
    BackendJob,
    EngineUnavailableError,
    ExecOutcome,
    ExecRequest,
    ForkRefusedError,
    HealthReport,
    ImageMissingError,
    JobKey,
    Limits,
    SandboxSpec,
    SandboxStartError,
    SessionInfo,
    StartOutcome,
    TooManySessionsError,
)
from sandboxd.docker.container import (
    BEAT_S,
    Layout,
    container_name,
    create_container,
    install_supervisor,
    paths_overlap,
    plan_layout,
    remove_control_dir,
    stage_supervisor,
    write_beat,
    write_hosts_file,
)
from sandboxd.docker.engine import PROBE_TIMEOUT_S, PROBE_WORKERS, Engine, api_error_text
from sandboxd.docker.exec_fallback import ExecCall, SandboxGoneError, run_exec
from sandboxd.docker.fifo import FifoPair
from sandboxd.docker.fork import (
    CopyPlan,
    ForkCopyError,
    await_copier,
    copier_name,
    create_copier,
    plan_copy,
)
from sandboxd.docker.job import SupervisedJob
from sandboxd.docker.keeping import GONE_REASON, Keeping, stopped_reason
from sandboxd.docker.mount_check import check_mounts, seen_problem
from sandboxd.docker.mount_report import exec_report, parse_exec_report
from sandboxd.docker.ownership import (
    LABEL_CREATED,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_OWNER_PROCESS,
    LABEL_SESSION,
    LABEL_STATE,
    OwnerProcess,
    disposition,
    engine_time,
    kept_elsewhere,
)
from sandboxd.docker.records import SandboxRecord
from sandboxd.docker.sandbox import KILLED_FROM_OUTSIDE, DockerSandbox
from sandboxd.docker.scratch import (
    ScratchVolume,
    doomed_volumes,
    remove_volumes,
    scratch_volumes,
    volumes_in,
)
from sandboxd.docker.step_clock import StepClock, describe_steps
from sandboxd.docker.supervisor_client import (
    REJOIN_TIMEOUT_S,
    ChannelFifos,
    ChannelLost,
    HeldJob,
    MountSeen,
    RunMessage,
    SupervisorChannel,
    SupervisorHello,
)
from sandboxd.egress.host_rules import Allowlist
from sandboxd.egress.proxy import (
    EgressEvent,
    EgressProxy,
    EgressSettings,
    host_addresses,
)
from sandboxd.inside import supervisor
from sandboxd.inside.egress_forwarder import OPENED, fifo_names
from sandboxd.sessions.caps import SessionCaps
from sandboxd.sessions.pool import PoolSettings
from sandboxd.sessions.table import POOL_SESSION, Sessions, shutting_down

START_TIMEOUT_S = 60.0
"""A container whose supervisor has not said hello by then is given up."""
_EGRESS_OPEN_TIMEOUT_S = 10.0
"""A connection's FIFO pair the forwarder has not opened by then is given up."""
_STATUS_POLL_S = 0.1
"""While waiting for the supervisor: the first check that the container still runs; each
next one waits twice as long, up to STATUS_POLL_MAX_S. WHY only a backstop: the supervisor's
connection is awaited directly; these checks catch a container that exits without connecting
(an image without python3, a crash), and 64 starts at once polling every 0.1 s kept the
engine busy answering them."""
_STATUS_POLL_MAX_S = 1.0
_REPLY_MARGIN_S = 10.0
"""Past a command's timeout and kill grace, how long a silent supervisor is trusted."""
_STALE_CONTROL_DIR_S = 60.0
_BUILD_HINT = "run `sandboxd build-image`"
_ADOPTIONS_AT_ONCE = 8
"""Sandboxes of the daemon before taken over at once when this one starts."""
_REMOVED_AT_STOP = (
    "it was removed when the sandbox daemon stopped, as its operator asked "
    "(`sandboxd stop --remove-sandboxes`)"
)
_DETACHED = (
    "the sandbox daemon stopped while it ran (its sandbox was kept for the next daemon; "
    "whether the command finished is unknown)"
)

logger = logging.getLogger(__name__)

EgressSink = Callable[[str, str, EgressEvent], None]
"""Told of each egress connection: the session, the sandbox's name, the event."""


class DockerBackend(AsyncCloseable):
    """Runs commands in per-session Docker containers; see sandboxd.backend for the contract."""

    def __init__(
        self,
        *,
        image: str,
        idle_ttl_s: float = 600.0,
        max_workers: int = 32,
        state_dir: Path,
        docker_base_url: str | None = None,
        session_caps: SessionCaps | None = None,
        pool: PoolSettings | None = None,
        egress: EgressSettings | None = None,
        on_egress: EgressSink | None = None,
        keeping: Keeping | None = None,
    ) -> None:
        """`session_caps`: by default derived from the host for the default Limits; `pool`:
        how many sandboxes to keep warm (None: none, see sandboxd.sessions.pool); `egress`: the
        bounds of sandboxes' egress proxies, `on_egress` hears of each of their connections;
        `keeping`: how its sandboxes outlive it (None: they end with it, see
        sandboxd.docker.keeping)."""
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._control_root = Path(state_dir).absolute() / "run"
        self._staged_supervisor = Path(state_dir).absolute() / "supervisor"
        """The supervisor's files once per daemon (see stage_supervisor)."""
        self.image = image
        self._egress = egress or EgressSettings()
        self._on_egress = on_egress
        self._own_addresses = host_addresses()
        self._engine = Engine(docker_base_url, max_workers)
        """Container starts, removals, inspections: quick calls."""
        self._exec_engine = Engine(docker_base_url, max_workers)
        """`docker exec` fallback commands, each holding a worker while it runs."""
        self._health_engine = Engine(docker_base_url, PROBE_WORKERS, timeout_s=PROBE_TIMEOUT_S)
        self.instance_id = secrets.token_hex(8)
        """Recorded on every container this backend creates (label sandboxd.owner)."""
        self._owner = OwnerProcess.current()
        self._keeping = keeping
        if session_caps is None:
            limits = Limits()
            session_caps = SessionCaps.derive(pids=limits.pids, memory_bytes=limits.memory)
        self._sessions: Sessions[DockerSandbox] = Sessions(
            caps=session_caps,
            idle_ttl_s=idle_ttl_s,
            start=self._start_sandbox,
            tear_down=self._tear_down,
            spawn=self._background,
            pool=pool,
            lost=keeping.lost if keeping is not None else None,
            on_handed=self._on_handed,
        )
        self._starting: set[str] = set()
        """Names of containers being created, so that gc() leaves them alone."""
        self._copiers: set[str] = set()
        """Names of forks' copier containers that exist (gc() leaves them alone)."""
        self._exec_mode_images: dict[str, str] = {}
        """Image names whose image had no python3, with that image's id (an id never
        changes; a name may be given to another image)."""
        self._filling: set[str] = set()
        """Sessions a fork is starting (their sandboxes are recorded as not filled yet)."""
        self._adopted = _AdoptedJobs(self)
        """The jobs taken over from the daemon before, until adopted_jobs() hands them out."""
        self._detached = False
        self._closed = False
        self._exit_stack = contextlib.AsyncExitStack()
        self._tasks: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> DockerBackend:
        self._control_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        stage_supervisor(self._staged_supervisor)
        caps = self._sessions.slots.caps
        logger.info("%s (%s)", caps.describe(), caps.basis)
        self._tasks = await self._exit_stack.enter_async_context(anyio.create_task_group())
        self._tasks.start_soon(self._sessions.reap_idle)
        if self._sessions.pool.enabled:
            self._tasks.start_soon(self._sessions.pool.run)
        # The engine may be down: health() reports it and run() raises until it is back.
        with contextlib.suppress(EngineUnavailableError):
            if self._keeping is not None:
                await self._adopt(self._keeping)
                self._tasks.start_soon(self._beat)
            await self.gc()
        return self

    async def detach(self) -> None:
        """Stop serving and leave every sandbox running, warm ones included, for the next
        daemon on this state directory (a backend that keeps nothing: nothing here, aclose()
        removes them). Commands still running are killed by their supervisor (nobody can
        hear their end); jobs go on."""
        if self._keeping is None or self._detached or self._closed:
            return
        self._detached = True
        for box in self._sessions.detach_all():
            for scope in list(box.egress or ()):
                scope.cancel()
            if box.channel is not None:
                box.channel.close(_DETACHED)
                with anyio.CancelScope(shield=True):
                    await box.channel.aclose()
        logger.info("left the sandboxes running for the next daemon on this state directory")

    async def aclose(self) -> None:
        """Kill running commands and remove every container this backend created, unless
        detach() left them to the next daemon."""
        if self._closed:
            return
        self._closed = True
        if not self._detached:
            with anyio.CancelScope(shield=True):
                await self._sessions.close_all(
                    "the sandbox daemon shut down while the command ran",
                    lost=_REMOVED_AT_STOP if self._keeping is not None else None,
                )
                # Ours that no session tracks any more (a removal the engine failed), orphans.
                with contextlib.suppress(BackendError, docker.errors.APIError):
                    await self.gc()
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()
        try:
            await self._exit_stack.aclose()
        finally:
            for engine in (self._engine, self._exec_engine, self._health_engine):
                engine.close()

    def adopted_jobs(self) -> AdoptedJobs:
        adopted, self._adopted = self._adopted, _AdoptedJobs(self)
        adopted.lost = {**self._sessions.lost.by_sandbox(), **adopted.lost}
        return adopted

    async def health(self) -> HealthReport:
        problems: list[str] = []
        version: str | None = None
        image_present = False
        engine = self._health_engine
        try:
            version = str(await engine.call(lambda api: api.version()["Version"]))
        except EngineUnavailableError as exc:
            problems.append(str(exc))
        except docker.errors.APIError as exc:
            problems.append(f"Docker engine at {engine.url} failed: {api_error_text(exc)}")
        if version is not None:
            try:
                await engine.call(lambda api: api.inspect_image(self.image))
                image_present = True
            except docker.errors.ImageNotFound:
                problems.append(f"image {self.image} missing: {_BUILD_HINT}")
            except (docker.errors.APIError, EngineUnavailableError) as exc:
                problems.append(f"could not inspect image {self.image}: {exc}")
        return HealthReport(
            ok=not problems,
            engine_version=version,
            image=self.image,
            image_present=image_present,
            problems=tuple(problems),
            containers=self._sessions.slots.in_use,
            max_sessions=self._sessions.slots.caps.total,
            max_sessions_per_caller=self._sessions.slots.caps.per_caller,
            warm=len(self._sessions.pool.boxes()),
            pool_problem=self._sessions.pool.last_failure,
            pool_size=self._sessions.pool.settings.size,
            pool_memory=self._sessions.pool.settings.memory,
            pool_places=tuple(self._sessions.pool.places()),
        )

    async def start(
        self, session: str, sandbox: SandboxSpec, *, wait: bool = True, fresh: bool = False
    ) -> StartOutcome:
        """Start the session's container for `sandbox` unless it runs already, its mounts
        checked; see sandboxd.backend.Backend.start."""
        if not wait and self._sessions.starting(session, sandbox):
            return StartOutcome("starting")
        try:
            claimed = await self._sessions.start(session, sandbox, fresh=fresh)
        except SandboxStartError as exc:
            return StartOutcome("failed", error=exc.message)
        box = claimed.box
        box.touch()
        if not claimed.started:
            return StartOutcome("running", box.name)
        logger.debug("started %s: %s", box.name, describe_steps(box.start_steps))
        notice = None
        if claimed.replaced is not None:
            notice = (
                f"this session's sandbox was lost ({claimed.replaced.reason}): this is a "
                "fresh, empty one; what the session's commands made outside the allowed "
                "paths, and its jobs, are gone"
            )
        return StartOutcome("started", box.name, steps=box.start_steps, notice=notice)

    async def run(self, session: str, sandbox: SandboxSpec, request: ExecRequest) -> ExecOutcome:
        """Run one command in the session's container for `sandbox`, starting it if needed.

        Raises only BackendError (engine unreachable, image missing, a lost session,
        shutting down); what happens to the command comes back in the Result.
        """
        started = time.monotonic()
        try:
            box = await self._sessions.sandbox_for(session, sandbox)
        except SandboxStartError as exc:
            failed = Result(
                command=request.command, error=exc.message, duration_s=time.monotonic() - started
            )
            return ExecOutcome(failed, sandbox="")
        seen = box.blocked_count
        await box.until_copied()
        # No await from here into running_command(): a fork beginning there would copy
        # while the command runs.
        with box.running_command():
            if box.channel is not None:
                outcome = await self._run_supervised(box, box.channel, request)
            else:
                outcome = ExecOutcome(await self._run_exec(box, request), sandbox=box.name)
        blocked = tuple(text for number, text in box.blocked if number > seen)
        if not blocked:
            return outcome
        return dataclasses.replace(
            outcome, result=dataclasses.replace(outcome.result, blocked=blocked)
        )

    async def fork(
        self,
        session: str,
        into: Sequence[str],
        *,
        spec: SandboxSpec | None = None,
        share_writable_mounts: bool = False,
    ) -> list[StartOutcome]:
        """New sessions `into`, each holding a copy of the session's /tmp and $HOME; see
        sandboxd.backend.Backend.fork."""
        source = self._fork_source(session, into)
        spec = source.spec if spec is None else spec
        _check_fork_spec(source.spec, spec, len(into), share_writable_mounts)
        outcomes: dict[str, StartOutcome] = {}
        self._filling.update(into)
        # The pool's refill waits for the copy (its starts would slow it down).
        with source.copying(), self._sessions.pool.held():
            try:
                boxes = await self._start_forks(into, spec, outcomes)
                await self._copy_into_forks(source, spec, boxes)
                for box in boxes:  # filled: a daemon after this one takes them over too
                    box.filling = False
                    await self._save_record(box)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    # Only the forks this call started: a session of the same id another
                    # request started meanwhile is not ours to close.
                    for target, outcome in outcomes.items():
                        if outcome.state == "started":
                            await self._sessions.close(target)
                raise
            finally:
                self._filling.difference_update(into)
        return [outcomes[target] for target in into]

    async def _start_forks(
        self, into: Sequence[str], spec: SandboxSpec, outcomes: dict[str, StartOutcome]
    ) -> list[DockerSandbox]:
        """Start every fork at once into `outcomes` (filled as they start, so that a failure
        closes the ones that did); their sandboxes, or an error once one did not start."""
        full: set[str] = set()
        async with anyio.create_task_group() as starts:
            for target in into:
                starts.start_soon(self._start_fork, target, spec, outcomes, full)
        failed = [o for o in outcomes.values() if o.state != "started"]
        if failed:
            # WHY the caps' own error when they refused: the caller may ask again
            # once a session ends, and a 429 says so.
            raise (TooManySessionsError if full else BackendError)(
                f"{len(failed)} of {len(into)} forks did not start: {failed[0].error}; "
                "none was kept",
                code=None if full else "fork_failed",
            )
        return [box for target in into for box in self._sessions.sandboxes_of(target)]

    async def _copy_into_forks(
        self, source: DockerSandbox, spec: SandboxSpec, boxes: Sequence[DockerSandbox]
    ) -> None:
        """Copy the source's scratch volumes into the forks' while their commands wait; a
        failed copy is a BackendError saying none was kept."""
        plan = plan_copy(
            source.volumes,
            [box.volumes for box in boxes],
            mounts=sorted({m.path for m in (*source.spec.mounts, *spec.mounts)}),
            user=f"{spec.uid}:{spec.gid}",
            cpus=source.spec.limits.cpus,
        )
        try:
            with contextlib.ExitStack() as quiet:
                for box in boxes:  # their commands wait for the copy too
                    quiet.enter_context(box.copying())
                await self._copy(source, plan)
        except ForkCopyError as exc:
            raise BackendError(
                f"the session could not be copied into its forks: {exc}; none was kept",
                code="fork_failed",
            ) from exc
        except docker.errors.APIError as exc:
            raise BackendError(
                "the Docker engine refused to copy the session into its forks: "
                f"{api_error_text(exc)}; none was kept",
                code="fork_failed",
            ) from exc

    async def _copy(self, source: DockerSandbox, plan: CopyPlan) -> None:
        """Run the copier (sandboxd.docker.fork) with the source frozen; raises ForkCopyError."""
        if not plan.places:
            return
        image = self._copier_image(source)
        name = copier_name()
        labels = self._labels(source.session)
        self._copiers.add(name)
        copier_id: str | None = None
        try:
            try:
                copier_id = created = await self._engine.call(
                    functools.partial(
                        create_copier, plan=plan, image=image, name=name, labels=labels
                    )
                )
                async with self._frozen(source):
                    await self._engine.call(lambda api: api.start(created))
                    # WHY abandoned on cancel: the copier's removal (below) ends the wait.
                    await anyio.to_thread.run_sync(
                        self._exec_engine.call_blocking,
                        functools.partial(await_copier, container_id=created),
                        abandon_on_cancel=True,
                        limiter=self._exec_engine.limiter,
                    )
            except docker.errors.ImageNotFound as exc:
                raise self._image_missing(image) from exc
            except docker.errors.APIError as exc:
                text = api_error_text(exc)
                if "executable file not found" in text:
                    text += f" (a fork's copier needs python3 in the image: {_BUILD_HINT})"
                raise ForkCopyError(f"its copier failed in image {image}: {text}") from exc
        finally:
            self._copiers.discard(name)
            if copier_id is not None:
                # Off the fork's answer: the source is thawed already, the forks are filled.
                self._background(self._remove_container, copier_id)

    def _copier_image(self, source: DockerSandbox) -> str:
        """The daemon's image, unless it was found without python3 (see sandboxd.docker.fork)."""
        if self.image not in self._exec_mode_images:
            return self.image
        if source.channel is not None:
            return source.spec.image
        raise ForkCopyError(
            f"a fork's copier needs python3, and neither the daemon's image {self.image} nor "
            f"the session's {source.spec.image} has it: configure an image with python3 "
            f"({_BUILD_HINT})"
        )

    @contextlib.asynccontextmanager
    async def _frozen(self, box: DockerSandbox) -> AsyncIterator[None]:
        """The sandbox frozen whole by the cgroup freezer (the engine's pause) while the block
        runs, and thawed after it, whatever happens: none of its processes runs meanwhile,
        whatever signals or timers they set up. Forks copying it at once share one freeze."""
        async with box.freeze_lock:
            if not box.freezes:
                try:
                    await self._engine.call(lambda api: api.pause(box.container_id))
                except docker.errors.APIError as exc:
                    raise ForkCopyError(
                        f"the session's sandbox could not be frozen: {api_error_text(exc)}"
                    ) from exc
            box.freezes += 1
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with box.freeze_lock:
                    box.freezes -= 1
                    if not box.freezes:
                        await self._thaw(box)

    async def _thaw(self, box: DockerSandbox) -> None:
        """Unpause it; one that cannot be thawed is of no use any more: it is retired."""
        try:
            await self._engine.call(lambda api: api.unpause(box.container_id))
        except (docker.errors.APIError, EngineUnavailableError) as exc:
            logger.warning("cannot thaw %s after a fork: %s", box.name, exc)
            reason = f"its sandbox could not be thawed after a fork ({exc})"
            self._background(functools.partial(self._sessions.retire, box, reason, lost=reason))

    def _fork_source(self, session: str, into: Sequence[str]) -> DockerSandbox:
        boxes = self._sessions.sandboxes_of(session)
        lost = self._sessions.lost.get(session)
        if not boxes and lost is not None:
            raise ForkRefusedError(
                f"its sandbox was lost ({lost.reason}), so there is nothing to fork: start it "
                'afresh (if_lost = "fresh") first',
                code=SESSION_LOST,
                status=410,
            )
        if not boxes:
            raise ForkRefusedError(
                "it has no running sandbox: start it (or run a command in it) first",
                code="unknown_session",
                status=404,
            )
        if len(boxes) > 1:
            raise ForkRefusedError(
                f"it has {len(boxes)} sandboxes (commands with different settings): fork "
                "a session whose commands all use the same settings",
                code="ambiguous_session",
                status=409,
            )
        source = boxes[0]
        if source.commands:
            raise ForkRefusedError(
                f"it is busy ({source.commands} command(s) or jobs running): fork it once "
                "they ended, so that the copy is of a state no command is changing",
                code="session_busy",
                status=409,
            )
        if session in into or any(
            self._sessions.known(target) or self._sessions.lost.get(target) for target in into
        ):
            raise ForkRefusedError(
                "a session it would fork into exists already: forks go into new sessions; "
                "choose unused session ids",
                code="session_exists",
                status=409,
            )
        return source

    async def _start_fork(
        self, target: str, spec: SandboxSpec, outcomes: dict[str, StartOutcome], full: set[str]
    ) -> None:
        """Start one fork into `outcomes`; `full` gets it when the session caps refused it."""
        try:
            outcome = await self.start(target, spec)
        except BackendError as exc:
            outcome = StartOutcome("failed", error=exc.message)
            if isinstance(exc, TooManySessionsError):
                full.add(target)
        if outcome.state == "running":  # another request started it after the check
            outcome = StartOutcome(
                "failed", error="a session it forks into was started meanwhile by another request"
            )
        outcomes[target] = outcome

    async def list_sessions(self) -> list[SessionInfo]:
        return self._sessions.infos()

    async def close_session(self, session: str) -> bool:
        """Kill the session's commands and remove its containers; False if it is unknown."""
        return await self._sessions.close(session)

    async def gc(self) -> int:
        """Remove orphaned containers (see sandboxd.docker.ownership) and our own untracked
        ones; how many were removed."""
        listed = await self._engine.call(
            lambda api: api.containers(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
        )
        boxes = [*self._sessions.all(), *self._sessions.pool.boxes()]
        tracked = {box.container_id for box in boxes}
        doomed: list[tuple[str, list[str]]] = []
        kept: set[str] = set()
        spared = self._starting | self._copiers
        state_id = self._keeping.state_id if self._keeping is not None else None
        for container in listed:
            labels = container.get("Labels") or {}
            names = [name.lstrip("/") for name in container.get("Names") or []]
            if container["Id"] in tracked or spared.intersection(names):
                kept.update(names)
                continue
            engine_state = str(container.get("State", ""))
            found = disposition(
                labels,
                engine_state,
                self._owner,
                instance=self.instance_id,
                state_id=state_id,
                stopped_at=await self._stopped_at(container["Id"])
                if kept_elsewhere(labels, engine_state, state_id)
                else None,
            )
            if found in ("ours", "kept", "sweep"):
                doomed.append((container["Id"], list(volumes_in(labels).values())))
            else:
                kept.update(names)
        async with anyio.create_task_group() as removals:
            for container_id, volumes in doomed:
                removals.start_soon(self._remove_container, container_id, volumes)
        # Volumes whose container is gone (a daemon killed before it removed them).
        stray = await self._engine.call(
            functools.partial(
                doomed_volumes,
                containers=kept,
                spared=set(self._starting),
                instance=self.instance_id,
                me=self._owner,
                state_id=state_id,
            )
        )
        await self._engine.call(functools.partial(remove_volumes, names=stray))
        self._remove_stale_control_dirs(
            {name for container in listed for name in container.get("Names") or []}
        )
        return len(doomed)

    async def _stopped_at(self, container_id: str) -> float | None:
        """When a stopped container stopped (epoch seconds); None when the engine cannot say."""
        try:
            inspected = await self._engine.call(lambda api: api.inspect_container(container_id))
        except docker.errors.APIError:  # removed meanwhile
            return None
        return engine_time(str((inspected.get("State") or {}).get("FinishedAt", "")))

    # Taking over ---------------------------------------------------------------------------

    async def _adopt(self, keeping: Keeping) -> None:
        """Take over the sandboxes the daemon before left running on this state directory;
        remove the others, their sessions told why (gc() then removes what carries this
        state directory's label without a record: starts and forks' copies cut short)."""
        records = await anyio.to_thread.run_sync(keeping.records.load)
        if not records:
            return
        listed = await self._engine.call(
            lambda api: api.containers(
                all=True, filters={"label": f"{LABEL_STATE}={keeping.state_id}"}
            )
        )
        found = {
            name.lstrip("/"): container
            for container in listed
            for name in container.get("Names") or []
        }
        limiter = anyio.CapacityLimiter(_ADOPTIONS_AT_ONCE)
        async with anyio.create_task_group() as adoptions:
            for record in records:
                adoptions.start_soon(
                    self._adopt_one, keeping, record, found.get(record.name), limiter
                )
        taken = len(self._sessions.all()) + len(self._sessions.pool.boxes())
        logger.info(
            "took over %d of the %d sandboxes the daemon before left (%d jobs)",
            taken,
            len(records),
            len(self._adopted.held),
        )

    async def _adopt_one(
        self,
        keeping: Keeping,
        record: SandboxRecord,
        container: Mapping[str, Any] | None,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        try:
            async with limiter:
                await self._take_over(keeping, record, container)
            return
        except _NotTakenOverError as exc:
            why = exc.reason
        logger.warning(
            "sandbox %s of session %s not taken over: %s", record.name, record.session, why
        )
        if not record.filling:  # WHY before the removal: a crash meanwhile must not hide it
            self._adopted.lost[record.name] = why
            await self._sessions.remember_lost(record.session, record.spec(), why, record.name)
        with anyio.CancelScope(shield=True):
            if container is not None:
                await self._remove_container(record.container_id, [v.name for v in record.volumes])
            with contextlib.suppress(OSError):
                await anyio.to_thread.run_sync(keeping.records.remove, record.name)
        remove_control_dir(self._control_root / record.control_dir)

    async def _take_over(
        self, keeping: Keeping, record: SandboxRecord, container: Mapping[str, Any] | None
    ) -> None:
        """Make `record`'s sandbox one of this backend's, its supervisor rejoined; or raise
        _NotTakenOverError with why it cannot be."""
        if container is None or container.get("Id") != record.container_id:
            raise _NotTakenOverError(GONE_REASON)
        state = str(container.get("State", ""))
        if state == "paused":  # frozen for a fork the daemon before never finished
            try:
                await self._engine.call(lambda api: api.unpause(record.container_id))
            except docker.errors.APIError as exc:
                raise _NotTakenOverError(
                    f"it was left frozen by a fork, and could not be thawed ({api_error_text(exc)})"
                ) from exc
            state = "running"
        if state != "running":
            try:
                inspected = await self._engine.call(
                    lambda api: api.inspect_container(record.container_id)["State"]
                )
            except docker.errors.APIError:
                inspected = {}
            raise _NotTakenOverError(
                stopped_reason(inspected, self._orphan_ttl_s, supervisor.ORPHANED_EXIT)
            )
        if record.filling:
            raise _NotTakenOverError(
                "it was a fork's sandbox not yet filled when its daemon stopped"
            )
        spec = record.spec()
        refused = await anyio.to_thread.run_sync(keeping.vet, spec)
        if refused is not None:
            raise _NotTakenOverError(
                f"the restarted daemon's policy no longer allows it: {refused}"
            )
        control_dir = self._control_root / record.control_dir
        channel, last_active = await self._rejoin(record, spec, control_dir)
        if channel is not None and any(held.end is None for held in channel.held):
            last_active = time.time()  # a job runs: not idle (its follower counts it soon)
        box = DockerSandbox(
            record.name,
            record.session,
            spec,
            record.container_id,
            record.layout(),
            control_dir,
            channel,
            {},
            volumes=record.scratch(),
            secret=record.secret,
            created_at=record.created_at,
            last_used_at=last_active,
        )
        if record.session == POOL_SESSION:
            slot = self._sessions.slots.hold(spec.uid)
            if not self._sessions.pool.adopt(spec, box):
                slot.release()
                if channel is not None:
                    await channel.aclose()
                raise _NotTakenOverError(
                    "the warm pool has no room for it under this daemon's [pool] settings"
                )
            box.slot = slot
        elif not self._sessions.adopt(box):
            if channel is not None:
                await channel.aclose()
            raise _NotTakenOverError("its session has another sandbox of the same settings")
        self._serve(box)
        for held in channel.held if channel is not None else ():
            self._adopted.held[JobKey(box.name, held.id)] = (box, held)

    async def _rejoin(
        self, record: SandboxRecord, spec: SandboxSpec, control_dir: Path
    ) -> tuple[SupervisorChannel | None, float]:
        """A kept sandbox reached again, its mounts checked: its supervisor's new channel
        (None in `docker exec` mode) and when it was last used; or _NotTakenOverError with
        why it cannot be."""
        if not record.supervised:
            report = await self._engine.call(
                functools.partial(
                    exec_report,
                    container_id=record.container_id,
                    user=f"{spec.uid}:{spec.gid}",
                    paths=[mount.path for mount in spec.mounts],
                )
            )
            problem = seen_problem(spec.mounts, parse_exec_report(report, len(spec.mounts)))
            if problem is not None:
                raise _NotTakenOverError(f"its mounts are not what was pinned any more: {problem}")
            return None, time.time()
        if record.secret is None:
            raise _NotTakenOverError("its supervisor gave no secret to reach it again by")
        try:
            fifos = ChannelFifos.rejoin(control_dir, record.secret, spec.uid, spec.gid)
        except OSError as exc:
            raise _NotTakenOverError(
                f"its control directory {control_dir} cannot be used ({exc})"
            ) from exc
        try:
            with anyio.fail_after(REJOIN_TIMEOUT_S):
                channel, hello = await fifos.handshake()
        except (
            TimeoutError,
            OSError,
            ValueError,
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
            anyio.BrokenResourceError,
        ) as exc:
            await fifos.aclose()
            why = str(exc) or type(exc).__name__
            raise _NotTakenOverError(
                f"its supervisor did not answer the restarted daemon within "
                f"{REJOIN_TIMEOUT_S:g} s ({why}): it was made by another sandboxd version, or "
                "it is stuck"
            ) from exc
        problem = seen_problem(spec.mounts, hello.mounts)
        if problem is None:
            try:
                _check_unix_sockets(spec, hello.unix_sockets)
                _check_egress(spec, hello.egress)
            except BackendError as exc:
                problem = exc.message
        if problem is not None:
            await channel.aclose()
            raise _NotTakenOverError(f"it is not what was checked any more: {problem}")
        return channel, hello.last_active or time.time()

    def _follow_adopted(self, box: DockerSandbox, held: HeldJob, command: str) -> SupervisedJob:
        """A job taken over (see _AdoptedJobs), followed until its end like a new one."""
        assert box.channel is not None
        margin = supervisor.KILL_GRACE_S + _REPLY_MARGIN_S
        left = held.started_at + held.timeout_s + margin - time.time()
        job = SupervisedJob(
            box.channel,
            JobKey(box.name, held.id),
            command,
            end_deadline=time.monotonic() + max(left, margin),
            lost_message=functools.partial(self._lost_message, box),
        )
        self._background(self._follow_job, box, job)
        return job

    async def _beat(self) -> None:
        """Rewrite the beat file of every sandbox without a supervisor, every BEAT_S, while
        this daemon runs (see sandboxd.docker.container.BEAT_FILE)."""
        while True:
            boxes = [*self._sessions.all(), *self._sessions.pool.boxes()]
            directories = [box.control_dir for box in boxes if box.channel is None]
            if directories:
                await anyio.to_thread.run_sync(_beat_all, directories, int(time.time()))
            await anyio.sleep(BEAT_S)

    # Sandboxes -----------------------------------------------------------------------------

    def _labels(self, session: str) -> dict[str, str]:
        """What a container this backend creates is labelled with (sandboxd.docker.ownership).
        WHY no owner process on a kept one: it outlives the process that made it, and no
        daemon may take that process's end for the sandbox's."""
        labels = {
            LABEL_MANAGED: "1",
            LABEL_SESSION: session,
            LABEL_CREATED: str(int(time.time())),
            LABEL_OWNER: self.instance_id,
        }
        if self._keeping is not None:
            labels[LABEL_STATE] = self._keeping.state_id
        else:
            labels[LABEL_OWNER_PROCESS] = self._owner.label
        return labels

    async def _start_sandbox(self, session: str, spec: SandboxSpec) -> DockerSandbox:
        clock = StepClock()
        try:
            return await self._start_container(session, spec, clock)
        except _NoPythonError:
            # WHY here and not where it was found: that container is removed first, so two
            # never hold one session slot at once.
            return await self._start_container(session, spec, clock)

    async def _start_container(
        self, session: str, spec: SandboxSpec, clock: StepClock
    ) -> DockerSandbox:
        """A new sandbox, its mounts checked; raises SandboxStartError (the command's error)
        or another BackendError, and _NoPythonError once the image is found without python3
        (it is then started again in exec mode)."""
        layout = plan_layout(spec)
        supervised = await self._supervised(spec, clock)
        token = secrets.token_hex(4)
        name = container_name(session, token)
        launch = _Launch(
            session=session,
            spec=spec,
            layout=layout,
            name=name,
            control_dir=self._control_root / token,
            volumes=scratch_volumes(name, spec, layout.scratch, layout.home),
        )
        self._prepare_control_dir(launch.control_dir, spec)
        handed_over = False
        self._starting.add(name)
        try:
            if supervised:
                launch.fifos = ChannelFifos.make(launch.control_dir, spec.uid, spec.gid)
            clock.lap("control_dir")
            container_id = await self._create_and_start(launch, supervised, clock)
            channel: SupervisorChannel | None = None
            secret: str | None = None
            if launch.fifos is not None:
                channel, secret = await self._greet(launch, launch.fifos, container_id, clock)
            else:
                await self._check_exec_mounts(spec, container_id, clock)
            box = await self._hand_over(launch, container_id, channel, secret, clock)
            handed_over = True
            return box
        finally:
            self._starting.discard(name)
            if launch.fifos is not None:
                with anyio.CancelScope(shield=True):
                    await launch.fifos.aclose()
            if not handed_over:
                await self._discard_launch(launch)

    async def _supervised(self, spec: SandboxSpec, clock: StepClock) -> bool:
        """Whether its container runs the supervisor (an image without python3 runs its
        commands with `docker exec`); refused when it must not run without one."""
        supervised = not await self._runs_in_exec_mode(spec.image)
        clock.lap("image")
        if not supervised and spec.allowed_hosts:
            raise BackendError(
                f"image {spec.image} has no python3, so its sandbox cannot forward to the egress "
                "proxy that allowed_hosts needs: use an image with python3",
                code="egress_unavailable",
            )
        return supervised

    async def _create_and_start(self, launch: _Launch, supervised: bool, clock: StepClock) -> str:
        """Its container, created and started; its id is in `launch` from the moment it
        exists, so that a failed start removes it."""
        spec = launch.spec
        create = functools.partial(
            create_container,
            name=launch.name,
            spec=spec,
            layout=launch.layout,
            labels=self._labels(launch.session),
            control_dir=str(launch.control_dir),
            supervised=supervised,
            volumes=launch.volumes,
            orphan_ttl_s=self._orphan_ttl_s,
        )
        try:
            launch.container_id = created = await self._engine.call(create)
            clock.lap("create")
            await self._engine.call(lambda api: api.start(created))
            clock.lap("start")
        except docker.errors.ImageNotFound as exc:
            raise self._image_missing(spec.image) from exc
        except docker.errors.APIError as exc:
            raise SandboxStartError(
                f"could not start a sandbox container from image {spec.image}: "
                f"{api_error_text(exc)}"
            ) from exc
        return created

    async def _greet(
        self, launch: _Launch, fifos: ChannelFifos, container_id: str, clock: StepClock
    ) -> tuple[SupervisorChannel, str | None]:
        """Its supervisor's channel and secret, once what the supervisor found inside matches
        the spec (mounts, Unix sockets refused, egress forwarder up); the channel is closed
        when not, as nothing else would close it."""
        spec = launch.spec
        try:
            channel, hello = await self._await_supervisor(fifos, container_id)
        except _NoPythonError:
            # No python3 in this image: remember, and start it in exec mode.
            self._exec_mode_images[spec.image] = await self._image_id(spec.image)
            raise
        launch.fifos = None  # the channel owns them now
        clock.lap("handshake")
        try:
            await _checked_mounts(spec, hello.mounts)
            _check_unix_sockets(spec, hello.unix_sockets)
            _check_egress(spec, hello.egress)
        except BackendError:
            await channel.aclose()
            raise
        return channel, hello.secret

    async def _check_exec_mounts(
        self, spec: SandboxSpec, container_id: str, clock: StepClock
    ) -> None:
        """Without a supervisor, the mounts as `docker exec` finds them inside must be the
        spec's."""
        report = await self._engine.call(
            functools.partial(
                exec_report,
                container_id=container_id,
                user=f"{spec.uid}:{spec.gid}",
                paths=[mount.path for mount in spec.mounts],
            )
        )
        await _checked_mounts(spec, parse_exec_report(report, len(spec.mounts)))
        clock.lap("mount_report")

    async def _hand_over(
        self,
        launch: _Launch,
        container_id: str,
        channel: SupervisorChannel | None,
        secret: str | None,
        clock: StepClock,
    ) -> DockerSandbox:
        """The checked container as a sandbox served from now on; not while the daemon
        closes, and only once recorded (a restart would lose it without a word)."""
        if self._sessions.closing:  # aclose() ran while this container started
            if channel is not None:
                await channel.aclose()
            raise shutting_down()
        box = DockerSandbox(
            launch.name,
            launch.session,
            launch.spec,
            container_id,
            launch.layout,
            launch.control_dir,
            channel,
            clock.steps,
            volumes=launch.volumes,
            secret=secret,
            filling=launch.session in self._filling,
        )
        try:
            await self._save_record(box, strict=True)
        except BaseException:
            if channel is not None:
                await channel.aclose()
            raise
        self._serve(box)
        return box

    async def _discard_launch(self, launch: _Launch) -> None:
        """Undo a start that did not become a sandbox: its container or, when its create
        failed, the volumes that create may have made, and its control directory."""
        with anyio.CancelScope(shield=True):
            names = [volume.name for volume in launch.volumes]
            if launch.container_id is not None:
                await self._remove_container(launch.container_id, names)
            else:  # a create that failed may have made some
                with contextlib.suppress(EngineUnavailableError):
                    await self._engine.call(functools.partial(remove_volumes, names=names))
        remove_control_dir(launch.control_dir)

    def _serve(self, box: DockerSandbox) -> None:
        """Serve its supervisor's channel (and its egress) from now on."""
        channel = box.channel
        if channel is None:
            return
        if box.spec.allowed_hosts:
            box.egress = set()
            channel.on_egress = functools.partial(self._open_egress, box)
        self._background(self._serve_channel, box, channel)

    @property
    def _orphan_ttl_s(self) -> float:
        return self._keeping.orphan_ttl_s if self._keeping is not None else 0.0

    async def _save_record(self, box: DockerSandbox, *, strict: bool = False) -> None:
        """Keep what the next daemon needs to take `box` over (nothing unless keeping).
        `strict`: a failure raises (the sandbox is not used: a restart would lose it without
        a word); otherwise it is logged."""
        if self._keeping is None:
            return
        try:
            await anyio.to_thread.run_sync(self._keeping.records.save, box.record())
        except (OSError, RecordFileError) as exc:
            if strict:
                raise BackendError(
                    f"cannot record the sandbox in the daemon's state directory ({exc}): "
                    "make its state_dir writable (or choose another one in its config) and "
                    "retry",
                    code="state_dir_unusable",
                ) from exc
            logger.warning("cannot record the sandbox %s: %s", box.name, exc)

    async def _on_handed(self, box: DockerSandbox) -> None:
        """A warm sandbox became a session's: its record says so before the session uses it
        (a daemon after this one must not take it back into its pool)."""
        await self._save_record(box)

    async def _runs_in_exec_mode(self, image: str) -> bool:
        """Whether `image` is one found without python3 (its commands run with `docker exec`).

        WHY no inspection otherwise: an image is assumed to have python3 until a container of
        it exits without one, so a start costs no engine call for it (a missing image fails
        the create)."""
        known = self._exec_mode_images.get(image)
        return known is not None and known == await self._image_id(image)

    async def _image_id(self, image: str) -> str:
        try:
            info = await self._engine.call(lambda api: api.inspect_image(image))
        except docker.errors.ImageNotFound as exc:
            raise self._image_missing(image) from exc
        except docker.errors.APIError as exc:
            raise BackendError(
                f"could not inspect image {image}: {api_error_text(exc)}", code="image_error"
            ) from exc
        return str(info["Id"])

    def _image_missing(self, image: str) -> ImageMissingError:
        fix = _BUILD_HINT if image == self.image else f"build or pull it (`docker pull {image}`)"
        return ImageMissingError(f"image {image} missing: {fix}")

    def _prepare_control_dir(self, control_dir: Path, spec: SandboxSpec) -> None:
        """The read-only /.sandboxd of one container: the supervisor and its settings, later
        its socket."""
        try:
            # WHY again here: a long-running daemon's state dir may be cleaned under it
            # (e.g. by a /tmp cleaner); the next container must not fail for that.
            self._control_root.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                self._fill_control_dir(control_dir, spec)
            except FileNotFoundError:  # the staged supervisor was cleaned away too
                remove_control_dir(control_dir)
                stage_supervisor(self._staged_supervisor)
                self._fill_control_dir(control_dir, spec)
        except OSError as exc:
            remove_control_dir(control_dir)
            raise BackendError(
                f"cannot prepare the sandbox's control directory {control_dir}: "
                f"{exc.strerror or exc}; make the daemon's state_dir writable (or choose "
                "another one in its config) and retry",
                code="state_dir_unusable",
            ) from exc

    def _fill_control_dir(self, control_dir: Path, spec: SandboxSpec) -> None:
        control_dir.mkdir(mode=0o755)
        control_dir.chmod(0o755)  # whatever the umask: the container's uid must traverse it
        install_supervisor(
            control_dir,
            mounts=[mount.path for mount in spec.mounts],
            egress=bool(spec.allowed_hosts),
            orphan_ttl_s=self._orphan_ttl_s,
            staged=self._staged_supervisor,
        )
        write_hosts_file(control_dir)
        write_beat(control_dir, 0)

    async def _await_supervisor(
        self, fifos: ChannelFifos, container_id: str
    ) -> tuple[SupervisorChannel, SupervisorHello]:
        """The supervisor's channel and hello; raises _NoPythonError if the image has no
        python3, else SandboxStartError with why it failed. The channel takes over `fifos`
        once it has a hello."""
        outcome: tuple[SupervisorChannel, SupervisorHello] | Exception = SandboxStartError(
            f"the sandbox supervisor did not say hello within {START_TIMEOUT_S:.0f} s"
        )
        with anyio.move_on_after(START_TIMEOUT_S):
            async with anyio.create_task_group() as waiting:

                async def accept() -> None:
                    nonlocal outcome
                    try:
                        outcome = await fifos.handshake()
                    except (OSError, ValueError, anyio.EndOfStream, anyio.IncompleteRead) as exc:
                        outcome = SandboxStartError(
                            f"the sandbox supervisor failed its handshake: {exc}"
                        )
                    except (anyio.DelimiterNotFound, TimeoutError):
                        outcome = SandboxStartError("the sandbox supervisor failed its handshake")
                    waiting.cancel_scope.cancel()

                async def watch() -> None:
                    nonlocal outcome
                    pause = _STATUS_POLL_S
                    while True:
                        await anyio.sleep(pause)
                        pause = min(pause * 2, _STATUS_POLL_MAX_S)
                        try:
                            state = await self._engine.call(
                                lambda api: api.inspect_container(container_id)["State"]
                            )
                        except (docker.errors.APIError, EngineUnavailableError) as exc:
                            outcome = SandboxStartError(
                                f"could not follow the sandbox container's start: {exc}"
                            )
                            waiting.cancel_scope.cancel()
                            return
                        if state.get("Running"):
                            continue
                        code = state.get("ExitCode")
                        if code == supervisor.NO_PYTHON_EXIT:
                            outcome = _NoPythonError()
                        else:
                            outcome = SandboxStartError(
                                f"the sandbox container exited (status {code}) before its "
                                f"supervisor said hello: {await self._last_logs(container_id)}"
                            )
                        waiting.cancel_scope.cancel()
                        return

                waiting.start_soon(accept)
                waiting.start_soon(watch)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _serve_channel(self, box: DockerSandbox, channel: SupervisorChannel) -> None:
        await channel.serve()
        if box.retired is None and not self._detached:
            # The supervisor died without the backend ending it (its container was killed
            # or removed from outside, or it crashed): no command can end it.
            why = box.stopped_reason() or f"its supervisor stopped: {channel.lost_reason}"
            await self._sessions.retire(box, why, lost=why)

    async def _open_egress(self, box: DockerSandbox, number: int) -> bool:
        """Make the FIFO pair of the forwarder's connection `number` and serve it through
        the sandbox's egress proxy (in the sandbox's own scope, so its tear-down ends it);
        whether the pair was made (the forwarder closes its connection otherwise)."""
        if box.egress is None or box.retired is not None:
            return False
        if len(box.egress) >= 2 * self._egress.max_connections:
            # WHY here too, and not only in the proxy: the request comes from inside the
            # sandbox, and each pair holds two of the daemon's descriptors until it is served.
            # Twice the proxy's bound, so that it still answers the first ones over it with a
            # 429 a client can read.
            return False
        up_name, down_name = fifo_names(number)
        try:
            pair = FifoPair.make(
                box.control_dir / up_name, box.control_dir / down_name, box.spec.uid, box.spec.gid
            )
        except OSError as exc:
            logger.warning("cannot make an egress connection's FIFOs: %s", exc)
            return False
        scope = anyio.CancelScope()
        box.egress.add(scope)  # counted from now: the serving task may start later
        self._background(self._serve_egress, box, pair, scope)
        return True

    async def _serve_egress(
        self, box: DockerSandbox, pair: FifoPair, scope: anyio.CancelScope
    ) -> None:
        """One egress connection: once the forwarder opened both FIFOs (its first byte says
        so) they are settled and the proxy serves it, until the sandbox is torn down."""
        assert box.egress is not None
        try:
            with scope:
                try:
                    with anyio.fail_after(_EGRESS_OPEN_TIMEOUT_S):
                        opened = await pair.stream.receive(1)
                    if opened != OPENED:
                        raise OSError("the forwarder did not open its FIFOs")
                    pair.settle()
                except (OSError, TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                await self._egress_proxy(box).handle(pair.stream)
        finally:
            box.egress.discard(scope)
            with anyio.CancelScope(shield=True):
                await pair.aclose()  # whatever ended it, a tear-down included

    def _egress_proxy(self, box: DockerSandbox) -> EgressProxy:
        """The sandbox's one proxy (its bounds are per sandbox), made at its first connection."""
        if box.egress_proxy is None:
            sink = self._on_egress

            def on_event(event: EgressEvent) -> None:
                if not event.allowed:
                    box.blocked_count += 1
                    where = f"{event.host}:{event.port}" if event.host else "(no target)"
                    box.blocked.append((box.blocked_count, f"{where}: {event.reason}"[:1024]))
                if sink is not None:
                    sink(box.session, box.name, event)

            box.egress_proxy = EgressProxy(
                Allowlist.parse(box.spec.allowed_hosts),
                self._egress,
                own_addresses=self._own_addresses,
                on_event=on_event,
            )
        return box.egress_proxy

    async def _tear_down(self, box: DockerSandbox, reason: str) -> None:
        """Fail the container's in-flight commands with `reason`, remove it and its control
        directory."""
        for scope in list(box.egress or ()):
            scope.cancel()
        if box.channel is not None:
            box.channel.close(reason)
        with anyio.CancelScope(shield=True):
            await self._remove_container(box.container_id, [v.name for v in box.volumes])
            if self._keeping is not None:
                with contextlib.suppress(OSError):
                    await anyio.to_thread.run_sync(self._keeping.records.remove, box.name)
        remove_control_dir(box.control_dir)

    async def _last_logs(self, container_id: str) -> str:
        try:
            logs = await self._engine.call(lambda api: api.logs(container_id, tail=20))
        except (docker.errors.APIError, EngineUnavailableError) as exc:
            return f"(its logs are unavailable: {exc})"
        return bytes(logs).decode(errors="replace").strip() or "(no output)"

    async def _remove_container(self, container_id: str, volumes: Iterable[str] = ()) -> None:
        """Remove the container, then its scratch `volumes` (the engine keeps named ones)."""
        # WHY best effort: a removal already under way (409), a container already gone or an
        # engine down must not fail a shutdown; gc() and the next start-up sweep retry.
        with contextlib.suppress(docker.errors.APIError, EngineUnavailableError):
            await self._engine.call(
                lambda api: api.remove_container(container_id, force=True, v=True)
            )
        names = list(volumes)
        if names:
            with contextlib.suppress(EngineUnavailableError):
                await self._engine.call(functools.partial(remove_volumes, names=names))

    def _remove_stale_control_dirs(self, container_names: set[str]) -> None:
        """Control dirs of containers that no longer exist (e.g. a killed daemon's)."""
        tokens = {name.rsplit("-", 1)[-1] for name in container_names}
        boxes = [*self._sessions.all(), *self._sessions.pool.boxes()]
        live = {box.control_dir.name for box in boxes}
        now = time.time()
        try:
            entries = list(self._control_root.iterdir())
        except FileNotFoundError:
            return  # cleaned away: recreated for the next container
        for entry in entries:
            if entry.name in tokens or entry.name in live:
                continue
            with contextlib.suppress(OSError):
                info = entry.lstat()
                if stat.S_ISDIR(info.st_mode) and now - info.st_mtime > _STALE_CONTROL_DIR_S:
                    remove_control_dir(entry)

    def _background(self, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        assert self._tasks is not None, "use the backend as `async with DockerBackend(...)`"
        self._tasks.start_soon(self._guarded, fn, *args)

    async def _guarded(self, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        """A background task's bug is logged; it must not take the whole backend down."""
        try:
            await fn(*args)
        except Exception:
            logger.exception("sandboxd backend task %s failed", getattr(fn, "__name__", fn))

    # Commands ------------------------------------------------------------------------------

    def _workdir(self, box: DockerSandbox, request: ExecRequest) -> str:
        if request.workdir:
            return request.workdir
        for mount in box.spec.mounts:
            if mount.identity.kind == "directory":
                return mount.path
        return box.layout.home

    async def _run_supervised(
        self, box: DockerSandbox, channel: SupervisorChannel, request: ExecRequest
    ) -> ExecOutcome:
        started = time.monotonic()
        message = RunMessage(
            id=channel.next_id(),
            command=request.command,
            env=request.command_env,
            cwd=self._workdir(box, request),
            timeout_s=request.timeout_s,
            max_output_bytes=request.max_output_bytes,
            max_saved_output_bytes=request.max_saved_output_bytes,
            background_after_s=request.background_after_s,
            live=request.live is not None,
        )
        replied_by = min(request.background_after_s or request.timeout_s, request.timeout_s)
        reply = await channel.run(
            message, replied_by + supervisor.KILL_GRACE_S + _REPLY_MARGIN_S, request.live
        )
        if isinstance(reply, ChannelLost):
            failed = Result(
                command=request.command,
                error=self._lost_message(box, reply),
                duration_s=time.monotonic() - started,
            )
            return ExecOutcome(failed, sandbox=box.name)
        if reply.phase != "background":
            return ExecOutcome(reply.to_result(request.command), sandbox=box.name)
        job = SupervisedJob(
            channel,
            JobKey(box.name, message.id),
            request.command,
            end_deadline=started + request.timeout_s + supervisor.KILL_GRACE_S + _REPLY_MARGIN_S,
            lost_message=functools.partial(self._lost_message, box),
        )
        self._background(self._follow_job, box, job)
        return ExecOutcome(reply.to_result(request.command), sandbox=box.name, job=job)

    async def _follow_job(self, box: DockerSandbox, job: SupervisedJob) -> None:
        """Until the job ends, it keeps its container in use (idle reaping leaves it)."""
        with box.running_command():
            await job.follow()

    def _lost_message(self, box: DockerSandbox, lost: ChannelLost) -> str:
        if lost.by_backend:
            return lost.reason
        return (
            f"the sandbox supervisor in {box.name} stopped ({lost.reason}): {KILLED_FROM_OUTSIDE}"
            "; no signal from a command ends it. Commands and jobs running in that container "
            "were lost with it, and what the session's commands made outside the allowed paths"
        )

    async def _run_exec(self, box: DockerSandbox, request: ExecRequest) -> Result:
        call = ExecCall(
            container_id=box.container_id,
            command=request.command,
            user=f"{box.spec.uid}:{box.spec.gid}",
            cwd=self._workdir(box, request),
            env=request.command_env,
            timeout_s=request.timeout_s,
            max_output_bytes=request.max_output_bytes,
        )
        cancelled = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                self._exec_engine.call_blocking,
                functools.partial(run_exec, call=call, cancelled=cancelled),
                abandon_on_cancel=True,
                limiter=self._exec_engine.limiter,
            )
        except anyio.get_cancelled_exc_class():
            cancelled.set()  # the worker kills the command within a poll interval
            raise
        except docker.errors.APIError as exc:
            return Result(
                command=request.command,
                error=f"the Docker engine refused to run the command: {api_error_text(exc)}",
            )
        except SandboxGoneError as exc:
            reason = f"the sandbox {box.name} cannot run commands any more: {exc}"
            await self._sessions.retire(box, reason, lost=reason)
            return Result(command=request.command, error=reason)


@dataclasses.dataclass
class _Launch:
    """A container being started as a session's sandbox, and what its start holds until it
    is handed over: its fifos until its channel owns them, its container once created."""

    session: str
    spec: SandboxSpec
    layout: Layout
    name: str
    control_dir: Path
    volumes: tuple[ScratchVolume, ...]
    fifos: ChannelFifos | None = None
    container_id: str | None = None


class _NoPythonError(Exception):
    """The image has no python3: its container must be started again in exec mode."""


class _NotTakenOverError(Exception):
    """A kept sandbox the daemon cannot take over: it is removed, and `reason` is what its
    session is told."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _checked_mounts(spec: SandboxSpec, seen: Sequence[MountSeen]) -> None:
    """check_mounts on a thread: with a ceiling it walks the host's directories, and a hung
    file system must not stall the event loop."""
    check = functools.partial(check_mounts, spec.mounts, seen, ceiling=spec.path_ceiling)
    await anyio.to_thread.run_sync(check)


def _check_unix_sockets(spec: SandboxSpec, reported: str) -> None:
    """The container's profile must have refused the supervisor a Unix socket, as it does
    every process in it, unless the spec allows them."""
    if spec.unix_sockets or reported == "denied":
        return
    raise BackendError(
        f"the sandbox's seccomp profile did not refuse Unix sockets ({reported}), so it was "
        "not used: sandboxed commands could reach host sockets under their mounts. Run "
        "sandboxd on a Linux kernel and engine with seccomp (x86_64 or aarch64), or allow "
        "Unix sockets (see allow_unix_sockets in the README) if you accept that risk",
        code="unix_sockets_not_denied",
    )


def _check_egress(spec: SandboxSpec, reported: str) -> None:
    """A sandbox with an allowlist must have its forwarder to the proxy listening."""
    if not spec.allowed_hosts or reported == "ready":
        return
    raise BackendError(
        f"the sandbox could not start its forwarder to the egress proxy ({reported}), so it "
        "was not used",
        code="egress_unavailable",
    )


def _check_fork_spec(
    source: SandboxSpec, forks: SandboxSpec, count: int, share_writable_mounts: bool
) -> None:
    """Refuse forks of `source` into `count` sandboxes of `forks` before any starts: a
    different image or user, or a host path more than one of them would write to."""
    if (forks.image, forks.uid, forks.gid) != (source.image, source.uid, source.gid):
        raise ForkRefusedError(
            f"its forks would run {forks.image} as {forks.uid}:{forks.gid}, and it runs "
            f"{source.image} as {source.uid}:{source.gid}: a fork keeps "
            "its session's image and user (ask for the same image)",
            code="fork_image",
            status=422,
        )
    shared = None if share_writable_mounts else _shared_writable(source, forks, count)
    if shared is not None:
        # WHY refused rather than mounted read-only in the forks: their commands would
        # then need other settings than the ones asked for to reach their sandboxes.
        # Sandboxes writing to one host directory at once overwrite each other's work:
        # only a caller who asks gets that.
        raise ForkRefusedError(
            f"{shared} would be written to by more than one sandbox at once (the session's "
            "and its forks'): ask for share_writable_mounts if that is what you want, "
            "give each fork paths of its own, or mount it read-only",
            code="writable_mounts",
            status=409,
        )


def _shared_writable(source: SandboxSpec, forks: SandboxSpec, count: int) -> str | None:
    """A host path two of the sandboxes would write to at once (the source's and `count`
    forks of `forks`), or None."""
    fork_writes = [m.path for m in forks.mounts if not m.read_only]
    source_writes = [m.path for m in source.mounts if not m.read_only]
    for path in source_writes:
        if any(paths_overlap(path, written) for written in fork_writes):
            return path
    # The forks all mount the same paths: two or more share every one they write to.
    return fork_writes[0] if count > 1 and fork_writes else None


def _beat_all(directories: Sequence[Path], beat: int) -> None:
    for directory in directories:
        with contextlib.suppress(OSError):
            write_beat(directory, beat)


class _AdoptedJobs:
    """The jobs a DockerBackend took over (a sandboxd.backend.AdoptedJobs)."""

    def __init__(self, backend: DockerBackend) -> None:
        self._backend = backend
        self.lost: dict[str, str] = {}
        self.held: dict[JobKey, tuple[DockerSandbox, HeldJob]] = {}

    def take(self, key: JobKey, command: str) -> BackendJob | None:
        entry = self.held.pop(key, None)
        if entry is None:
            return None
        box, held = entry
        return self._backend._follow_adopted(box, held, command)

    async def release_rest(self) -> None:
        rest, self.held = self.held, {}
        for box, held in rest.values():
            if box.channel is not None:
                await box.channel.kill(held.id)
                await box.channel.forget(held.id)
