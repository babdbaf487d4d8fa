"""The contract between sandboxd's daemon and its container backend.

The daemon decides *what* may run (policy: mounts, env, network); the backend decides *how*
(containers, supervisor, limits). These types are all that crosses that line. Importing this
module never imports docker: `DockerBackend` is loaded on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from logos.options import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_SAVED_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
)
from logos.result import Result
from sandboxd.pinned import FileIdentity, identify

if TYPE_CHECKING:
    from sandboxd.docker_backend import DockerBackend

__all__ = [
    "BackendError",
    "DockerBackend",
    "EngineUnavailableError",
    "ExecOutcome",
    "ExecRequest",
    "HealthReport",
    "ImageMissingError",
    "Limits",
    "Mount",
    "MountChangedError",
    "SandboxSpec",
    "SessionInfo",
    "TooManySessionsError",
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


@dataclass(frozen=True)
class Limits:
    """Resource ceilings of one container (all its commands share them)."""

    memory_bytes: int = 2 * 1024**3
    cpus: float = 1.0
    pids: int = 512
    tmp_bytes: int = 512 * 1024**2
    """Size of the /tmp tmpfs; $HOME gets a smaller one (see `home_bytes`)."""

    def __post_init__(self) -> None:
        if self.memory_bytes < MIN_MEMORY_BYTES:
            raise ValueError(
                f"memory_bytes must be at least {MIN_MEMORY_BYTES} (16 MiB), "
                f"got {self.memory_bytes}"
            )
        if not self.cpus > 0:
            raise ValueError(f"cpus must be > 0, got {self.cpus}")
        if self.pids < 16:
            raise ValueError(f"pids must be at least 16 (bash, the supervisor...), got {self.pids}")
        if self.tmp_bytes < 1024**2:
            raise ValueError(f"tmp_bytes must be at least 1 MiB, got {self.tmp_bytes}")

    @property
    def home_bytes(self) -> int:
        """$HOME holds dotfiles and caches, not build trees: a quarter of /tmp, at least 16 MiB."""
        return max(16 * 1024**2, self.tmp_bytes // 4)


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

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("image must be a non-empty image reference")
        if self.uid < 0 or self.gid < 0:
            raise ValueError(f"uid and gid must be >= 0, got {self.uid}:{self.gid}")
        targets = [mount.path for mount in self.mounts]
        if len(set(targets)) != len(targets):
            raise ValueError(f"each path may be mounted once, got {targets}")


@dataclass(frozen=True)
class ExecRequest:
    """One command to run in a session's container."""

    command: str
    env: Mapping[str, str] = field(default_factory=dict)
    """Already filtered by the daemon's policy; set on top of the sandbox's base environment."""
    workdir: str | None = None
    """None: the first mount's path, else the container's HOME."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """Per stream: the head and tail kept (see logos.capture.OutputCapture)."""
    max_saved_output_bytes: int = DEFAULT_MAX_SAVED_OUTPUT_BYTES
    """Per stream: how much of a cut output is saved inside the container (0: none)."""

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError("command must be a non-empty string")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        if self.max_output_bytes < 64:
            raise ValueError(f"max_output_bytes must be at least 64, got {self.max_output_bytes}")
        if self.max_saved_output_bytes < 0:
            raise ValueError("max_saved_output_bytes must be >= 0 (0 disables saving)")


@dataclass(frozen=True)
class ExecOutcome:
    result: Result
    """`stdout_file`/`stderr_file` are paths inside the container, readable by the session's
    next command."""
    sandbox: str
    """The container's name."""


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


class ImageMissingError(BackendError):
    """The sandbox image is not present in the engine (the daemon answers 503)."""

    code = "image_missing"


class TooManySessionsError(BackendError):
    """A new container would exceed max_sessions or max_sessions_per_caller (429)."""

    code = "too_many_sessions"


def __getattr__(name: str) -> Any:
    # WHY lazy: the implementation imports docker (and requests); the daemon's wire models,
    # the client and the CLI import these types without paying for it.
    if name == "DockerBackend":
        from sandboxd.docker_backend import DockerBackend

        return DockerBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
