"""The contract between sandboxd's daemon and its container backend.

The daemon decides *what* may run (policy: mounts, env, network); a backend decides *how*
(containers, supervisor, limits). `Backend` and these types are all that crosses that line, so
a new backend is a module of its own that implements `Backend` (as sandboxd.docker does) plus
one case in sandboxd.server.backends. Importing this module never imports an engine's client
library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from logos.ceiling import PathCeiling
from logos.closing import AsyncCloseable
from logos.options import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_SAVED_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    NONINTERACTIVE_ENV,
)
from logos.result import Result
from logos.runners.live import LiveOutput
from sandboxd.api import SESSION_LOST, TOO_MANY_SESSIONS
from sandboxd.policy.pinned import FileIdentity, identify
from sandboxd.sizes import Size

__all__ = [
    "AdoptedJobs",
    "Backend",
    "BackendError",
    "BackendJob",
    "EngineUnavailableError",
    "ExecOutcome",
    "ExecRequest",
    "ForkRefusedError",
    "HealthReport",
    "ImageMissingError",
    "JobKey",
    "Limits",
    "Mount",
    "MountChangedError",
    "OutsideCeilingError",
    "SandboxSpec",
    "SandboxStartError",
    "SessionInfo",
    "SessionLostError",
    "StartOutcome",
    "TooManySessionsError",
    "WarmPlaces",
]

MIN_MEMORY_BYTES = 16 * 1024**2


@dataclass(frozen=True)
class Mount:
    """A host path the container sees at the same absolute path.

    The daemon's policy has already resolved (realpath) and checked it; `identity` is what the
    path named then, and what the container must show at that path before any command runs.
    """

    path: str
    read_only: bool
    identity: FileIdentity

    def __post_init__(self) -> None:
        if not self.path.startswith("/") or "\0" in self.path:
            raise ValueError(
                f"mount path must be absolute and free of NUL bytes, got {self.path!r}"
            )

    @classmethod
    def of(cls, path: str, *, read_only: bool = True) -> Mount:
        """A mount of `path` as it is now (resolved), for callers without a policy check."""
        resolved = os.path.realpath(path, strict=True)
        return cls(resolved, read_only, identify(resolved))


class Limits(BaseModel):
    """Resource ceilings of one container (all its commands share them); the config's
    `[limits]` table, whose keys are these fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: Annotated[Size, Field(ge=MIN_MEMORY_BYTES)] = 2 * 1024**3
    """Memory limit of a container, swap included (bytes or "2g")."""
    cpus: float = Field(default=1.0, gt=0, le=1024)
    """CPU share of a container (1.0 = one core)."""
    pids: int = Field(default=512, ge=16)
    """Maximum number of processes in a container (stops fork bombs; bash and the supervisor
    need a few)."""
    tmp: Annotated[Size, Field(ge=1024**2)] = 512 * 1024**2
    """Size of the /tmp tmpfs in a container (bytes or "512m"); $HOME gets a smaller one."""

    @property
    def home(self) -> int:
        """$HOME holds dotfiles and caches, not build trees: a quarter of /tmp, at least 16 MiB."""
        return max(16 * 1024**2, self.tmp // 4)


@dataclass(frozen=True)
class SandboxSpec:
    """What a container is created with; fixed for its life (the key of warm reuse)."""

    image: str
    mounts: tuple[Mount, ...]
    network: bool
    uid: int
    """The caller's uid (from SO_PEERCRED): commands run as it."""
    gid: int
    limits: Limits = field(default_factory=Limits)
    unix_sockets: bool = False
    """Whether commands may create Unix sockets (connect to host sockets under the mounts)."""
    allowed_hosts: tuple[str, ...] = ()
    """With network off: the hosts its egress proxy may connect to (sandboxd.egress.host_rules
    entries, normalised); empty: no proxy, no way out."""
    reclaimable: bool = False
    """Whether the daemon may remove it while idle to make room under the session caps (a
    temenos caller's: temenos gives every command a fresh sandbox, so nothing is lost)."""
    path_ceiling: PathCeiling | None = field(default=None, compare=False)
    """The roots of the caller whose request asked for it (logos.ceiling): once its mounts are
    made, each must still lie within them. WHY not part of the key of warm reuse: the policy
    holds every request's pinned mounts to that request's own ceiling before a sandbox is
    chosen, so a sandbox is reused only for mounts the asking caller may have, whatever
    ceiling it was first made under."""

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("image must be a non-empty image reference")
        if self.uid < 0 or self.gid < 0:
            raise ValueError(f"uid and gid must be >= 0, got {self.uid}:{self.gid}")
        if self.network and self.allowed_hosts:
            raise ValueError("allowed_hosts is for a sandbox without network; network is on")
        targets = [mount.path for mount in self.mounts]
        if len(set(targets)) != len(targets):
            raise ValueError(f"each path may be mounted once, got {targets}")


@dataclass(frozen=True)
class ExecRequest:
    """One command to run in a session's container."""

    command: str
    env: Mapping[str, str] = field(default_factory=dict)
    """Already filtered by the daemon's policy; see `command_env`."""
    workdir: str | None = None
    """None: the first mount's path, else the container's HOME."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """Per stream: the head and tail kept (see logos.runners.capture.OutputCapture)."""
    max_saved_output_bytes: int = DEFAULT_MAX_SAVED_OUTPUT_BYTES
    """Per stream: how much of a cut output is saved inside the container (0: none)."""
    background_after_s: float | None = None
    """A command still running then goes on as a job (`ExecOutcome.job`); None: never. A
    backend that cannot keep jobs runs the command to its end."""
    live: LiveOutput | None = field(default=None, compare=False)
    """Where what the command prints goes while it runs, for a watcher; None: nobody
    watches. A backend that cannot tell leaves it empty (the result has the output)."""

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError("command must be a non-empty string")
        if self.background_after_s is not None and not self.background_after_s > 0:
            raise ValueError(
                f"background_after_s must be > 0 seconds, got {self.background_after_s}"
            )
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        if self.max_output_bytes < 64:
            raise ValueError(f"max_output_bytes must be at least 64, got {self.max_output_bytes}")
        if self.max_saved_output_bytes < 0:
            raise ValueError("max_saved_output_bytes must be >= 0 (0 disables saving)")

    @property
    def command_env(self) -> dict[str, str]:
        """What a backend sets for the command on top of the sandbox's own environment: the
        non-interactive environment every runner uses (logos.options), under `env`."""
        return {**NONINTERACTIVE_ENV, **self.env}


@dataclass(frozen=True)
class JobKey:
    """A job's name in its backend, the same for the daemon that started it and the next
    one (sandboxd.sessions.job_store keeps it)."""

    sandbox: str
    number: int


class BackendJob(Protocol):
    """A command that went on past its background threshold, in its sandbox.

    It keeps its sandbox in use (idle reaping leaves it alone) until it ends: on its own, at
    its timeout, by `kill`, or with its sandbox (a closed session, the sandbox lost). It
    outlives the daemon when its backend keeps sandboxes across restarts.
    """

    @property
    def key(self) -> JobKey: ...

    @property
    def end(self) -> Result | None:
        """How it ended (status, duration, files; its output comes from `output`), once it
        did."""
        ...

    @property
    def ended_at(self) -> float | None:
        """Unix time of its end."""
        ...

    async def wait(self) -> None:
        """Until it ended."""
        ...

    async def output(self, since_background: bool) -> Result:
        """Its output so far, or once it ended its last (head and tail each), with its
        files and, once it ended, `end`'s status; `since_background`: without what its
        background answer showed. Its `error` says so when the output cannot be had."""
        ...

    async def kill(self) -> None:
        """Stop it (its whole process group); its end follows."""
        ...

    async def forget(self) -> None:
        """The daemon is done with it: its sandbox may drop its output."""
        ...


@dataclass(frozen=True)
class ExecOutcome:
    result: Result
    """`stdout_file`/`stderr_file` are paths inside the container, readable by the session's
    next command. With `job`: its output so far (it has not ended)."""
    sandbox: str
    """The container's name."""
    job: BackendJob | None = None
    """The command went on as a job (`ExecRequest.background_after_s`)."""


@dataclass(frozen=True)
class StartOutcome:
    """What a start request found or did: the sandbox running, under way, or why it is not."""

    state: Literal["started", "running", "starting", "failed"]
    """"started" by this call, "running" already, "starting" (another call's start is under
    way and this one did not wait for it), or "failed" (see `error`)."""
    sandbox: str = ""
    """The sandbox's name, once it runs."""
    error: str | None = None
    """Why it could not start (a message for Result.error)."""
    steps: Mapping[str, float] = field(default_factory=dict)
    """Seconds each step of the start took, in order, when this call started it: where a
    new session's time goes (the audit line and the benchmark show them)."""
    notice: str | None = None
    """Set when a fresh sandbox replaced the session's lost one (`fresh=True`): what was
    lost and why, for the caller to pass on."""


class AdoptedJobs(Protocol):
    """The jobs a backend took over from the daemon before it (see Backend.adopted_jobs)."""

    @property
    def lost(self) -> Mapping[str, str]:
        """Sandboxes that were not taken over, with why: their jobs ended with them."""
        ...

    def take(self, key: JobKey, command: str) -> BackendJob | None:
        """The job `key` (its command is `command`), followed from now on; None when its
        sandbox holds no such job."""
        ...

    async def release_rest(self) -> None:
        """Stop and forget the jobs nobody took (the daemon before died before keeping
        them)."""
        ...


@dataclass(frozen=True)
class SessionInfo:
    id: str
    containers: tuple[str, ...]
    created_at: float
    """Unix time."""
    last_used_at: float
    running: int
    """Commands running now."""


@dataclass(frozen=True)
class WarmPlaces:
    """The warm pool's places held for one spec (see sandboxd.sessions.pool)."""

    spec: SandboxSpec
    warm: int
    """Warm sandboxes ready for it."""
    starting: int
    """Warm sandboxes starting for it."""
    last_claimed_at: float | None
    """Unix time of the last start that asked for it (None: forgotten, its places going)."""
    kept_warm: bool
    """Whether a claim is refilled; False: callers use other specs now, and its places go to
    them when they need them."""


@dataclass(frozen=True)
class HealthReport:
    ok: bool
    engine_version: str | None
    image: str
    image_present: bool
    problems: tuple[str, ...]
    """Each says what is wrong and how to fix it."""
    containers: int
    """Sandbox containers of all callers, starting and closing ones included."""
    max_sessions: int
    max_sessions_per_caller: int
    warm: int = 0
    """Warm sandboxes waiting in the pool (counted in `containers`), see sandboxd.sessions.pool."""
    pool_problem: str | None = None
    """Why the pool could not fill lately (new sessions then start cold): a warning, not a
    problem: sandboxes still start."""
    pool_size: int = 0
    """`[pool] size`: 0 when the pool is off."""
    pool_memory: int = 0
    """`[pool] memory`, bytes."""
    pool_places: tuple[WarmPlaces, ...] = ()
    """The specs holding warm places, the most lately claimed first."""


class BackendError(Exception):
    """The engine or the image stands in the way; the message says what to do."""

    code: str = "backend_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class EngineUnavailableError(BackendError):
    """The Docker engine cannot be reached (the daemon answers 503)."""

    code = "engine_unavailable"


class MountChangedError(BackendError):
    """The container did not see what the policy checked at a mount (the daemon answers 409):
    a path was swapped between the check and the mount. The container was destroyed before
    any command ran."""

    code = "mount_changed"


class OutsideCeilingError(MountChangedError):
    """A mount no longer lay within its caller's ceiling once made (the daemon answers 403):
    it was moved between the check and the mount. The container was destroyed before any
    command ran."""

    code = "path_outside_ceiling"


class ImageMissingError(BackendError):
    """The sandbox image is not present in the engine (the daemon answers 503)."""

    code = "image_missing"


class SandboxStartError(BackendError):
    """A sandbox could not be started (a container the engine refused, a supervisor that
    never said hello, mounts that cannot work): the message is the command's error."""

    code = "start_failed"


class SessionLostError(BackendError):
    """The session's sandbox is gone without its caller closing it (the daemon answers 410):
    its files outside the allowed paths and its jobs went with it. The caller may ask for a
    fresh sandbox (`fresh=True`), or close the session."""

    code = SESSION_LOST

    def __init__(self, session: str, reason: str, at: float) -> None:
        super().__init__(f"its sandbox was lost: {reason}")
        self.session = session
        self.reason = reason
        self.at = at
        """Unix time it was found lost."""


class ForkRefusedError(BackendError):
    """A fork the session's state does not allow: an unknown session (404), a busy one, a
    target session that exists already (409). The message says which and what to do."""

    code = "fork_refused"

    def __init__(self, message: str, *, code: str, status: int) -> None:
        super().__init__(message, code=code)
        self.status = status


class TooManySessionsError(BackendError):
    """A new container would exceed max_sessions or max_sessions_per_caller (429)."""

    code = TOO_MANY_SESSIONS


class Backend(AsyncCloseable, Protocol):
    """What runs sandboxes for the daemon's routes, `sandboxd doctor` and `sandboxd gc`.

    Used as `async with`: entering starts its housekeeping (idle reaping, a sweep of stray
    sandboxes) and, for a backend that keeps sandboxes across restarts, takes over those the
    daemon before it left; leaving (`aclose()`) kills running commands and removes every
    sandbox it created, unless `detach()` came first. Sessions are the daemon's ids (already
    per caller); a session has one sandbox per SandboxSpec.
    """

    async def health(self) -> HealthReport:
        """Whether the engine answers and the default image is there, each problem with its fix."""
        ...

    async def start(
        self, session: str, sandbox: SandboxSpec, *, wait: bool = True, fresh: bool = False
    ) -> StartOutcome:
        """Start the session's sandbox for `sandbox` unless it runs already, its mounts checked.

        `wait=False`: while another call is starting it, answer "starting" at once instead of
        waiting for that start. `fresh`: a session whose sandbox was lost gets a new one (the
        outcome's `notice` says what was lost). Raises BackendError (SessionLostError for a
        lost session without `fresh`, MountChangedError when a mount is not what was checked,
        TooManySessionsError over a session cap)."""
        ...

    async def detach(self) -> None:
        """Stop serving (as `aclose()` will) and leave every sandbox running for the next
        daemon to take over, when this backend keeps them; otherwise nothing."""
        ...

    def adopted_jobs(self) -> AdoptedJobs:
        """The jobs taken over from the daemon before this one (empty for a backend that
        keeps nothing); handed out once, the first call."""
        ...

    async def run(self, session: str, sandbox: SandboxSpec, request: ExecRequest) -> ExecOutcome:
        """Run one command in the session's sandbox for `sandbox`, starting it if needed; a
        command still running at its background threshold goes on as a job.

        Raises only BackendError; what happens to the command comes back in the Result."""
        ...

    async def fork(
        self,
        session: str,
        into: Sequence[str],
        *,
        spec: SandboxSpec | None = None,
        share_writable_mounts: bool = False,
    ) -> list[StartOutcome]:
        """New sessions `into`, each a sandbox holding a copy of what the session's commands
        changed outside the mounts (its /tmp and $HOME); one outcome each. The forks'
        sandboxes are of `spec` (None: the session's own; another spec keeps its image and
        uid, and may mount other paths). Forks of one session may copy it at once; its
        commands wait for the copies.

        Two of the sandboxes (the session's and its forks') writing to one host path is
        refused unless `share_writable_mounts`. Raises ForkRefusedError (unknown or busy
        session, a target that exists, another image, read-write mounts not shared) and
        BackendError (a fork that could not start or be filled: none of them is kept)."""
        ...

    async def list_sessions(self) -> list[SessionInfo]: ...

    async def close_session(self, session: str) -> bool:
        """Kill the session's commands and remove its sandboxes; False if it is unknown."""
        ...

    async def gc(self) -> int:
        """Remove stray sandboxes (those of daemons that are gone); how many were removed."""
        ...
