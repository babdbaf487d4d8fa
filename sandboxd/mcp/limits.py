"""What an MCP client of `sandboxd mcp` may ask for: the launch's limits, and a call's narrowing
of them.

The person who launches the server decides which host paths, hosts, image, environment and
limits its sandboxes get; a client (an editor's agent) can only narrow them per call: a
sub-directory of an allowed path, read-only instead of read-write, fewer hosts, a shorter
timeout (`logos.options.narrowing`, the one narrowing every front uses). Anything wider is
refused with the reason, before the daemon is asked.

WHY the daemon is asked to hold each call to the launch's paths too: a path is a name, and
another sandbox of the launch (read-write on a launch path) can swap a directory in it for a
symlink to anywhere between this check and the daemon's mount. So the launch pins its paths
when it starts (logos.ceiling) and sends them, as each call's ceiling, with every call: the
daemon decides on what it mounts; the check here only makes the refusal early and friendly.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from logos.ceiling import PathCeiling, ceiling_of, os_reason
from logos.options import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, AllowedPath, ExecOptions
from logos.options.declarations import (
    ALLOW,
    ALLOW_HOST,
    DEFAULT_BACKGROUND_AFTER_S,
    DEFAULT_MAX_FORKS,
    DEFAULT_MAX_TIMEOUT_S,
    MAX_TIMEOUT,
    NETWORK,
    TIMEOUT,
)
from logos.options.narrowing import Asked, Ceiling, NarrowingRefused, narrowed
from logos.options.option import Place

_HERE = Place.SANDBOXD_RUN
"""Where a call's narrowing sits: the run tool's arguments."""
MAX_COMMAND_BYTES = 64 * 1024
"""A longer command line is refused: a shell script that long belongs in a file."""
_MAX_ENV_ENTRIES = 64
_MAX_ENV_BYTES = 32 * 1024
"""Per variable: name and value together."""
_RESERVED_ENV = frozenset(
    {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "FTP_PROXY", "SSL_CERT_FILE"}
)
"""Set by the sandbox for its egress proxy: a client that changed them could only break (or try
to bypass) the hosts the launch allowed."""


class NarrowingError(ValueError):
    """A call asked for more than the launch allows; the message says what and what to do."""


@dataclass(frozen=True)
class McpLaunch:
    """What `sandboxd mcp` was launched with: the widest any call may get."""

    socket: str | None = None
    """The daemon's socket (None: sandboxd's default)."""
    allowed_paths: tuple[AllowedPath, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    network: bool = False
    image: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Set for every command; a client cannot change these."""
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    max_timeout_s: float = DEFAULT_MAX_TIMEOUT_S
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    background_after_s: float | None = DEFAULT_BACKGROUND_AFTER_S
    """A command still running after this long goes on as a job (None: never)."""
    max_forks: int = DEFAULT_MAX_FORKS
    """Forks one client may hold at once."""
    max_concurrent_calls: int = 8
    """Calls of one client that run at the same time; more wait their turn."""
    path_ceiling: PathCeiling = field(init=False)
    """`allowed_paths`, pinned when the launch is made: every call's ceiling."""
    ceiling: Ceiling = field(init=False)
    """What a call may narrow: the paths (pinned), the hosts, the network, the timeout."""

    def __post_init__(self) -> None:
        for name in ("default_timeout_s", "max_timeout_s"):
            value = getattr(self, name)
            if not 0 < value < math.inf:
                raise ValueError(f"{name} must be a finite number of seconds > 0, got {value}")
        if self.default_timeout_s > self.max_timeout_s:
            raise ValueError(
                f"the default timeout ({self.default_timeout_s:g} s) is longer than the maximum "
                f"({self.max_timeout_s:g} s): lower the one or raise the other"
            )
        if self.max_forks < 0 or self.max_concurrent_calls < 1:
            raise ValueError("max_forks must be >= 0 and max_concurrent_calls >= 1")
        ExecOptions(env=self.env, allowed_hosts=self.allowed_hosts)  # the same checks as a run's
        paths = ceiling_of(self.allowed_paths)
        object.__setattr__(self, "path_ceiling", paths)
        widest = {
            TIMEOUT: self.max_timeout_s,
            ALLOW_HOST: self.allowed_hosts,
            NETWORK: self.network,
            ALLOW: None,
        }
        ceiling = Ceiling.of(
            "this server",
            (Place.SANDBOXD_LAUNCH,),
            widest,
            defaults={TIMEOUT: self.default_timeout_s, ALLOW: self.allowed_paths},
            set_by={TIMEOUT: MAX_TIMEOUT},
            paths=paths,
        )
        object.__setattr__(self, "ceiling", ceiling)


@dataclass(frozen=True)
class PathAsk:
    """A path a call asks to see: one of the launch's, or a directory under one."""

    path: str
    writable: bool = False


def narrowed_options(
    launch: McpLaunch,
    *,
    paths: Sequence[PathAsk] | None,
    hosts: Sequence[str] | None,
    env: Mapping[str, str] | None,
    workdir: str | None,
    timeout_s: float | None,
    background: bool,
) -> ExecOptions:
    """The options of one call: the launch's, narrowed as the call asks; NarrowingError when
    it asks for more."""
    asked = []
    if paths is not None:
        asked_paths = [AllowedPath(path=ask.path, read_only=not ask.writable) for ask in paths]
        asked.append(Asked(ALLOW, ALLOW.name_at(_HERE), asked_paths))
    if hosts is not None:
        asked.append(Asked(ALLOW_HOST, ALLOW_HOST.name_at(_HERE), list(hosts)))
    if timeout_s is not None:
        asked.append(Asked(TIMEOUT, TIMEOUT.name_at(_HERE), timeout_s))
    try:
        values = narrowed(launch.ceiling, asked)
    except NarrowingRefused as exc:
        raise NarrowingError(str(exc)) from None
    allowed = values.paths
    options_env = {**_checked_env(launch, env or {}), **launch.env}
    try:
        return ExecOptions(
            env=options_env,
            allowed_paths=allowed,
            allowed_hosts=values.hosts,
            workdir=None if workdir is None else _checked_workdir(workdir, allowed),
            timeout_s=values[TIMEOUT] or launch.default_timeout_s,
            max_output_bytes=launch.max_output_bytes,
            inherit_env=False,
            background_after_s=launch.background_after_s if background else None,
            path_ceiling=launch.path_ceiling,
        )
    except ValueError as exc:
        raise NarrowingError(str(exc)) from None


def _checked_env(launch: McpLaunch, env: Mapping[str, str]) -> dict[str, str]:
    if len(env) > _MAX_ENV_ENTRIES:
        raise NarrowingError(f"env has {len(env)} variables; at most {_MAX_ENV_ENTRIES} are taken")
    for name, value in env.items():
        if name.upper() in _RESERVED_ENV:
            raise NarrowingError(
                f"env {name} is set by the sandbox for its egress proxy: a client cannot change it"
            )
        if name in launch.env:
            raise NarrowingError(
                f"env {name} is fixed by the server's launch: a client cannot change it"
            )
        if len(name) + len(value) > _MAX_ENV_BYTES:
            raise NarrowingError(f"env {name} is longer than {_MAX_ENV_BYTES} bytes")
    return dict(env)


def _checked_workdir(workdir: str, allowed: Sequence[AllowedPath]) -> str:
    try:
        real = os.path.realpath(workdir) if os.path.isabs(workdir) else ""
        inside = any(_within(real, os.path.realpath(p.path)) for p in allowed)
    except OSError as exc:
        # WHY caught: a name being swapped can fail even a lenient realpath (a symlink
        # gone between its lstat and its readlink).
        raise NarrowingError(
            f"workdir {workdir!r} cannot be looked at ({os_reason(exc)}): retry once nothing "
            "renames it or its parent directories"
        ) from None
    if not inside:
        raise NarrowingError(
            f"workdir {workdir!r} must be an absolute path inside one of the call's paths "
            f"({', '.join(p.path for p in allowed) or 'none'})"
        )
    return real


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
