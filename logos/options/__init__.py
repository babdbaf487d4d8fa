"""What a command may see and how long it may run: the options every runner honours."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import field

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

from logos.ceiling import CeilingRoot, PathAccess

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_MAX_SAVED_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "NONINTERACTIVE_ENV",
    "AllowedPath",
    "ExecOptions",
    "declarations",
    "described_paths",
    "narrowing",
    "option",
]


DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_OUTPUT_BYTES = 32 * 1024
DEFAULT_MAX_SAVED_OUTPUT_BYTES = 64 * 1024 * 1024

NONINTERACTIVE_ENV: Mapping[str, str] = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "DEBIAN_FRONTEND": "noninteractive",
    "PIP_NO_INPUT": "1",
    "NPM_CONFIG_YES": "true",
    "HOMEBREW_NO_AUTO_UPDATE": "1",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "LANG": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
}
"""Set for every command by every runner, under the command's own `env`: nothing may wait for
a human, open a pager or an editor, and output reads the same locally and in a sandbox."""

_STRICT = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_STRICT)
class AllowedPath:
    """A host path a command may use; read-only unless said otherwise."""

    path: str
    read_only: bool = True


def described_paths(paths: Iterable[PathAccess]) -> str:
    """`/a (read-only), /b (read-write)`: host paths as a prompt or a report names them."""
    return ", ".join(f"{p.path} ({'read-only' if p.read_only else 'read-write'})" for p in paths)


@dataclass(frozen=True, config=_STRICT)
class ExecOptions:
    """Per-command execution options shared by every runner.

    A timeout is always set: an agent must never wait forever on a command.
    """

    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set for the command, on top of the inherited environment."""
    allowed_paths: tuple[AllowedPath, ...] = ()
    """Host paths the command may use (the sandbox mounts exactly these)."""
    allowed_hosts: tuple[str, ...] = ()
    """Hosts a sandboxed command may reach with network off (`pypi.org`, `*.example.org`,
    `api.example.org:8443`): sandboxd's egress proxy enforces them. A local command has the
    machine's network; a sandbox that cannot enforce a list refuses the command."""
    workdir: str | None = None
    """Working directory; defaults to the first allowed path, else the current directory."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Wall-clock limit; the whole process group is killed when it expires."""
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """Per stream: the head and tail kept for the model; the middle is counted and dropped."""
    inherit_env: bool = True
    """Start from the parent's environment (local runner) or only `env` when False."""
    max_saved_output_bytes: int = DEFAULT_MAX_SAVED_OUTPUT_BYTES
    """Per stream: how much of a truncated output is saved to a file the model can read."""
    background_after_s: float | None = None
    """A command still running after this many seconds goes on as a job (its result says
    so, `Result.job`) on a runner that keeps jobs (`logos.runners.job_runner.JobRunner`); others
    ignore it. None: commands are waited for until they end or time out."""
    path_ceiling: tuple[CeilingRoot, ...] | None = None
    """The roots `allowed_paths` must lie within, pinned when a front granted them
    (logos.ceiling): a sandbox refuses a path that leads outside them once resolved, however
    it got there. None: no ceiling beyond the sandbox's own policy. A local command reaches
    the whole machine, so the local runner has nothing to hold to it."""

    def __post_init__(self) -> None:
        if not 0 < self.timeout_s < math.inf:
            raise ValueError(
                f"timeout_s must be a finite number of seconds > 0, got {self.timeout_s}"
            )
        for key, value in self.env.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ValueError(
                    f"env entry {key!r} cannot be passed to a process: a name must be "
                    "non-empty without '=' or NUL, and a value must not hold NUL"
                )
        for host in self.allowed_hosts:
            if not host.strip() or "\0" in host:
                raise ValueError(f"allowed_hosts entry {host!r} must be a non-empty host name")
        if self.max_output_bytes < 64:
            raise ValueError(f"max_output_bytes must be at least 64, got {self.max_output_bytes}")
        if self.max_saved_output_bytes < 0:
            raise ValueError("max_saved_output_bytes must be >= 0 (0 disables saving)")
        if self.background_after_s is not None and not 0 < self.background_after_s < math.inf:
            raise ValueError(
                "background_after_s must be a finite number of seconds > 0, or None to wait "
                f"for every command, got {self.background_after_s}"
            )

    def resolved_workdir(self) -> str | None:
        """The working directory rule: `workdir`, else the first allowed path, else None."""
        if self.workdir:
            return self.workdir
        if self.allowed_paths:
            return self.allowed_paths[0].path
        return None

    def background_at_s(self) -> float | None:
        """When a command goes on as a job: `background_after_s`, unless its timeout ends it
        first (then never)."""
        after = self.background_after_s
        return after if after is not None and after < self.timeout_s else None
