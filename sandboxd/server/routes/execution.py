"""Placing a request's sandbox and running its command: what the run routes (ours and
temenos's), the start and the fork share.

A placement is checked against the policy (its image, hosts, network, Unix sockets, env and
paths: the paths resolved and pinned on the daemon's path-check threads) into a SandboxSpec,
whose sandbox the backend starts while the paths stay pinned. A command then reserves its
reply's worst-case output memory (sandboxd.server.admission) before it runs, given back once
the answer is sent; one still running at its background threshold goes on as a job
(sandboxd.sessions.jobs), kept for its caller.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import anyio

from logos.ceiling import CeilingRoot, PathCeiling
from logos.result import JobStarted, Result
from logos.runners.live import FLUSH_S as LIVE_FLUSH_S, LiveOutput
from sandboxd.api import LiveLine, LivePieceModel, StartRequest
from sandboxd.backend import (
    BackendError,
    BackendJob,
    ExecOutcome,
    ExecRequest,
    Mount,
    SandboxSpec,
    SessionLostError,
    StartOutcome,
)
from sandboxd.policy.errors import PolicyError
from sandboxd.policy.policy import PathGrant
from sandboxd.server.admission import Reservation
from sandboxd.server.audit import AuditMount, AuditNote
from sandboxd.server.http import EarlyAnswer, PeerCredentials
from sandboxd.server.routes.common import (
    DaemonState,
    Problem,
    backend_problem,
    backend_session,
    identity,
    session_lost,
)
from sandboxd.sessions.jobs import Job, TooManyJobsError


@dataclass(frozen=True)
class Placement:
    """Where a session's commands run: what chooses (and starts) its sandbox, whichever
    request (a run in our shape or temenos's, a start) asked for it."""

    env: dict[str, str]
    allowed_paths: Sequence[tuple[str, bool]]
    workdir: str | None
    network: bool
    unix_sockets: bool
    session: str
    image: str | None
    allowed_hosts: Sequence[str] = ()
    reclaimable: bool = False
    """A temenos caller's: its idle sandbox may be removed to make room (SandboxSpec)."""
    path_ceiling: PathCeiling | None = None
    """The roots a front granted its caller: every mount must lie within them."""
    fresh: bool = False
    """A session whose sandbox was lost gets a fresh one (else it is refused, 410)."""

    @classmethod
    def of(cls, body: StartRequest, session: str) -> Placement:
        """The placement a request in our shape (a run, a start, a fork's sandbox) asks for."""
        ceiling = body.path_ceiling
        return cls(
            env=body.env,
            allowed_paths=[(p.path, p.read_only) for p in body.allowed_paths],
            workdir=body.workdir,
            network=body.network,
            unix_sockets=body.unix_sockets,
            session=session,
            image=body.image,
            allowed_hosts=body.allowed_hosts,
            path_ceiling=None
            if ceiling is None
            else tuple(CeilingRoot(r.path, r.read_only, r.device, r.inode) for r in ceiling),
            fresh=body.if_lost == "fresh",
        )


@dataclass(frozen=True)
class Order:
    """One command to run, and where."""

    command: str
    placement: Placement
    timeout_s: float | None
    max_output_bytes: int
    max_saved_output_bytes: int
    background_after_s: float | None
    caller_id: str | None = None
    """temenos's opaque caller id, kept with a job for its filter."""


@dataclass(frozen=True)
class Specified:
    """A placement checked against the policy: its sandbox's spec, env and workdir."""

    spec: SandboxSpec
    env: dict[str, str]
    """Filtered by the policy."""
    stripped_env_keys: list[str]
    workdir: str | None


@dataclass(frozen=True)
class Placed(Specified):
    """A placement checked and its sandbox started (or why it did not start)."""

    session: str
    """The backend's session (the caller's uid and session id)."""
    outcome: StartOutcome


@dataclass(frozen=True)
class Ran:
    outcome: ExecOutcome
    """With `outcome.result.job` set when the command went on as `job`."""
    stripped_env_keys: list[str]
    timeout_s: float
    output_memory: Reservation | None
    """Held until the answer has been sent (see `answer`); None when the command never ran."""
    job: Job | None = None
    notice: str | None = None
    """What a fresh sandbox replaced (see StartOutcome.notice)."""


@contextlib.contextmanager
def answer(ran: Ran) -> Iterator[Callable[[], None] | None]:
    """The release of the reply's output memory, for the answer being built: the HTTP layer
    calls it once the answer is sent; if building the answer fails, it is called at once."""
    release = ran.output_memory.release if ran.output_memory is not None else None
    try:
        yield release
    except BaseException:
        if release is not None:
            release()
        raise


async def execute_watched(
    daemon: DaemonState,
    order: Order,
    peer: PeerCredentials | None,
    note: AuditNote,
    early: EarlyAnswer,
) -> Ran:
    """`execute`, relaying what the command prints as it runs (`RunRequest.live`)."""
    live = LiveOutput()

    async def relay() -> None:
        while True:
            await anyio.sleep(LIVE_FLUSH_S)
            for piece in live.take():
                output = LivePieceModel.model_validate(piece, from_attributes=True)
                line = LiveLine(output=output)
                await early.send_line(line.model_dump_json(exclude_none=True).encode())

    ran: Ran | Problem
    async with anyio.create_task_group() as relaying:
        relaying.start_soon(relay)
        try:
            ran = await execute(daemon, order, peer, note, live)
        except Problem as problem:
            ran = problem  # WHY out of the group: a task group would wrap it in a group
        finally:
            live.close()
            relaying.cancel_scope.cancel()
    if isinstance(ran, Problem):
        raise ran
    return ran


async def execute(
    daemon: DaemonState,
    order: Order,
    peer: PeerCredentials | None,
    note: AuditNote,
    live: LiveOutput | None = None,
) -> Ran:
    """Place `order` and run its command; a refusal raises Problem, a sandbox that did not
    start is the command's error."""
    note.command = order.command
    started = time.monotonic()
    config = daemon.config
    placed = await place(daemon, order.placement, peer, note, wait=True)
    timeout_s = min(order.timeout_s or config.default_timeout_s, config.max_timeout_s)
    stripped = placed.stripped_env_keys
    if placed.outcome.error is not None:
        failed = Result(
            command=order.command,
            error=placed.outcome.error,
            duration_s=time.monotonic() - started,
        )
        note.error = placed.outcome.error
        return Ran(ExecOutcome(failed, sandbox=""), stripped, timeout_s, None)
    exec_request = ExecRequest(
        # temenos runs an empty command (`bash -c ''` exits 0); a backend wants one.
        command=order.command or ":",
        env=placed.env,
        workdir=placed.workdir,
        timeout_s=timeout_s,
        max_output_bytes=order.max_output_bytes,
        max_saved_output_bytes=order.max_saved_output_bytes,
        background_after_s=order.background_after_s,
        live=live,
    )
    output_memory = await daemon.reserve_output_memory(order.max_output_bytes)
    try:
        outcome = await daemon.backend.run(placed.session, placed.spec, exec_request)
    except BackendError as exc:
        output_memory.release()
        raise backend_problem(exc) from None
    except BaseException:
        output_memory.release()
        raise
    result = outcome.result
    note.sandbox = outcome.sandbox
    job = None
    if outcome.job is not None:
        try:
            job = await _keep_job(daemon, outcome.job, order, placed.spec.uid, timeout_s, result)
        except BaseException:
            output_memory.release()
            raise
        note.job = job.id
        went_on = JobStarted(job.id, result.stdout_file, result.stderr_file)
        outcome = replace(outcome, result=replace(result, job=went_on))
    note.exit_code = result.exit_code
    note.signal = result.signal
    note.timed_out = result.timed_out
    note.error = result.error
    return Ran(
        outcome=outcome,
        stripped_env_keys=stripped,
        timeout_s=timeout_s,
        output_memory=output_memory,
        job=job,
        notice=placed.outcome.notice,
    )


async def _keep_job(
    daemon: DaemonState,
    backend_job: BackendJob,
    order: Order,
    uid: int,
    timeout_s: float,
    result: Result,
) -> Job:
    """The command went on as a job: keep it for its caller (429 over the cap)."""
    try:
        # WHY shielded: a job its caller was not told of must still be listed.
        with anyio.CancelScope(shield=True):
            job = await daemon.jobs.add(
                backend_job,
                uid=uid,
                session=order.placement.session,
                command=order.command,
                caller_id=order.caller_id,
                started_at=time.time() - result.duration_s,
                timeout_s=timeout_s,
                max_output_bytes=order.max_output_bytes,
                stdout_file=result.stdout_file,
                stderr_file=result.stderr_file,
            )
    except TooManyJobsError as refused:
        raise Problem(429, "too_many_jobs", str(refused)) from None
    return job


async def place(
    daemon: DaemonState,
    placement: Placement,
    peer: PeerCredentials | None,
    note: AuditNote,
    *,
    wait: bool,
) -> Placed:
    """Check `placement` against the policy and start its sandbox unless it runs (see
    Backend.start for `wait`). Raises Problem for a refusal (403, 409, 429, 503…)."""
    async with specified(daemon, placement, peer, note) as checked:
        session = backend_session(checked.spec.uid, placement.session)
        try:
            # WHY the paths stay pinned only until here: while the sandbox starts and its
            # mounts are checked, and not for the whole (maybe hour-long) command.
            outcome = await daemon.backend.start(
                session, checked.spec, wait=wait, fresh=placement.fresh
            )
        except SessionLostError as lost:
            raise session_lost(placement.session, lost) from None
        except BackendError as exc:
            raise backend_problem(exc) from None
    if outcome.steps:
        note.start_steps = dict(outcome.steps)
    return Placed(**vars(checked), session=session, outcome=outcome)


@contextlib.asynccontextmanager
async def specified(
    daemon: DaemonState, placement: Placement, peer: PeerCredentials | None, note: AuditNote
) -> AsyncIterator[Specified]:
    """The sandbox `placement` asks for, checked against the policy, its paths pinned
    while the context lasts (start it there). Raises Problem for a refusal."""
    note.session = placement.session
    note.network = placement.network
    note.allowed_hosts = list(placement.allowed_hosts) or None
    uid, gid = identity(peer)
    config, policy = daemon.config, daemon.policy
    _check_count("allowed_paths", len(placement.allowed_paths), config.max_allowed_paths)
    _check_count("allowed_hosts", len(placement.allowed_hosts), config.max_allowed_hosts)
    _check_count("path_ceiling", len(placement.path_ceiling or ()), config.max_allowed_paths)
    try:
        image = policy.check_image(placement.image)
        note.image = image
        hosts = policy.check_hosts(placement.allowed_hosts, network=placement.network)
        policy.check_network(placement.network)
        policy.check_unix_sockets(placement.unix_sockets)
        grant, workdir = await _checked_paths(daemon, placement, uid, note)
    except PolicyError as refusal:
        raise Problem(refusal.status, refusal.code, refusal.message) from None
    with grant:
        try:
            env, stripped = policy.filter_env(placement.env)
        except PolicyError as refusal:
            raise Problem(refusal.status, refusal.code, refusal.message) from None
        note.stripped_env_keys = stripped
        spec = SandboxSpec(
            image=image,
            mounts=tuple(
                Mount(path=g.path, read_only=g.read_only, identity=g.identity) for g in grant.paths
            ),
            network=placement.network,
            uid=uid,
            gid=gid,
            limits=config.limits,
            unix_sockets=placement.unix_sockets,
            allowed_hosts=hosts,
            reclaimable=placement.reclaimable,
            path_ceiling=placement.path_ceiling,
        )
        yield Specified(spec, env, stripped, workdir)


_TOO_MANY = {
    "allowed_paths": (
        "too_many_paths",
        "max_allowed_paths",
        "mount a common parent directory instead",
    ),
    "allowed_hosts": (
        "too_many_hosts",
        "max_allowed_hosts",
        "use a wildcard such as *.example.org",
    ),
    "path_ceiling": (
        "too_many_roots",
        "max_allowed_paths",
        "grant a common parent directory instead",
    ),
}
"""Per counted field of a request: the error code over the bound, the config's key of the
bound, and what to do instead."""


def _check_count(field: str, count: int, most: int) -> None:
    """A request lists at most `most` entries of `field` (the config's bound for it)."""
    if count > most:
        code, key, fix = _TOO_MANY[field]
        raise Problem(
            422,
            code,
            f"the request lists {count} {field} and this daemon takes at most {most} "
            f"({key} in its config): {fix}",
        )


async def _checked_paths(
    daemon: DaemonState, placement: Placement, uid: int, note: AuditNote
) -> tuple[PathGrant, str | None]:
    """The pinned mounts and the resolved workdir, checked on a path-check thread."""
    granted: list[PathGrant] = []

    def check() -> str | None:
        grant = daemon.policy.grant_paths(
            placement.allowed_paths,
            caller_home=daemon.caller_home(uid),
            ceiling=placement.path_ceiling,
        )
        granted.append(grant)
        note.mounts = [
            AuditMount(
                path=g.path,
                read_only=g.read_only,
                device=g.identity.device,
                inode=g.identity.inode,
                kind=g.identity.kind,
            )
            for g in grant.paths
        ]
        return daemon.policy.check_workdir(placement.workdir, grant.paths)

    try:
        if not placement.allowed_paths and placement.workdir is None:
            workdir = check()  # nothing to resolve: spare the warm path a thread hop
        else:
            # WHY not abandoned on cancel: the thread's grant holds descriptors, closed
            # below once the call has returned.
            workdir = await anyio.to_thread.run_sync(check, limiter=daemon.path_checks)
    except BaseException:
        for grant in granted:
            grant.close()
        raise
    return granted[0], workdir
