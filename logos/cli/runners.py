"""Where the model's commands run: local bash, or sandboxd's Docker sandbox.

The sandbox is checked up front (GET /v1/health), so a missing daemon is reported before
the model is called and money is spent.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from logos.cli.errors import CliError
from logos.local_runner import LocalRunner
from logos.options import AllowedPath, ExecOptions
from logos.prompt import build_system_prompt
from sandboxd.client import health_problem
from sandboxd.paths import SocketPathError, resolve_socket_path
from sandboxd.runner import SandboxRunner


@dataclass(frozen=True)
class RunnerSpec:
    """How commands run, as the flags say."""

    sandbox: bool = False
    socket: str | None = None
    image: str | None = None
    network: bool = False

    @property
    def kind(self) -> str:
        return "sandbox" if self.sandbox else "local"


def parse_allow(spec: str) -> AllowedPath:
    """`PATH[:ro|:rw]` → an AllowedPath, resolved (symlinks too) and checked to exist."""
    path, read_only = spec, True
    head, sep, tail = spec.rpartition(":")
    if sep and tail in ("ro", "rw"):
        path, read_only = head, tail == "ro"
    if not path:
        raise CliError(f"--allow {spec!r}: give a path, e.g. --allow ./src:rw")
    resolved = os.path.realpath(os.path.expanduser(path))
    if not os.path.isdir(resolved):
        suffix = ""
        if sep and tail not in ("ro", "rw") and "/" not in tail:
            suffix = f" (if :{tail} was meant as a suffix: it is :ro or :rw)"
        raise CliError(
            f"--allow {spec!r}: {resolved} is not a directory{suffix}: give an existing one"
        )
    return AllowedPath(path=resolved, read_only=read_only)


def allowed_paths(specs: Sequence[str], default_dir: str) -> tuple[AllowedPath, ...]:
    """The paths of `--allow`, or `default_dir` read-write when none was given."""
    if not specs:
        return (AllowedPath(path=os.path.realpath(default_dir), read_only=False),)
    return tuple(parse_allow(spec) for spec in specs)


def sandbox_socket(spec: RunnerSpec) -> Path:
    """The daemon's socket, found as the daemon finds it (`--socket`, $SANDBOXD_SOCKET, …)."""
    try:
        return resolve_socket_path(spec.socket)
    except SocketPathError as exc:
        raise CliError(str(exc)) from None


def sandboxd_problem(socket: Path) -> str | None:
    """Why sandboxd on `socket` cannot run commands now, with the fix; None when it can."""
    return health_problem(socket)


def make_runner(spec: RunnerSpec) -> LocalRunner | SandboxRunner:
    if not spec.sandbox:
        return LocalRunner()
    return SandboxRunner(socket=sandbox_socket(spec), image=spec.image, network=spec.network)


def system_prompt_for(
    spec: RunnerSpec, options: ExecOptions, extra: str = "", date: dt.date | None = None
) -> str:
    """The system prompt, telling the model what the sandbox lets it see (as of `date`,
    by default today)."""
    workdir = options.resolved_workdir() or os.getcwd()
    if not spec.sandbox:
        return build_system_prompt(working_dir=workdir, date=date, extra=extra)
    paths = ", ".join(
        f"{p.path} ({'read-only' if p.read_only else 'read-write'})" for p in options.allowed_paths
    )
    network = "on" if spec.network else "off: do not try to download anything"
    return build_system_prompt(
        working_dir=workdir,
        platform="Linux in a Docker sandbox, shell bash",
        date=date,
        extra=f"Commands run in a sandbox that sees only these host paths: {paths}. "
        f"Network access is {network}.\n{extra}",
    )
