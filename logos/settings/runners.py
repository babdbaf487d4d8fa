"""Where the model's commands run, as the settings say: local bash, or the sandbox kind
`--sandbox` (or the config file's `sandbox`) names; and the system prompt that tells the
model so.

The sandbox (sandboxd's by default, or another kind found by name through logos.runners.sandboxes)
is checked up front, so a missing daemon is reported before the model is called and money
is spent.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from logos.commands.job_commands import job_usage
from logos.commands.memory import memory_usage
from logos.errors import SettingsError
from logos.options import AllowedPath, ExecOptions
from logos.options.declarations import DEFAULT_SANDBOX_KIND
from logos.protocol.prompt import PromptStyle, build_system_prompt
from logos.runners.base import Runner
from logos.runners.local import LocalRunner
from logos.runners.sandboxes import SandboxKind, SandboxSettings, sandbox_kind


@dataclass(frozen=True)
class RunnerSpec:
    """How commands run, as the flags say."""

    sandbox: str | None
    """The sandbox kind's name; None for local bash."""
    settings: SandboxSettings
    """What the sandbox is asked for, all but the paths (each run's own)."""

    @property
    def kind(self) -> Literal["local", "sandbox"]:
        return "sandbox" if self.sandbox else "local"

    def sandbox_settings(self, paths: tuple[AllowedPath, ...] = ()) -> SandboxSettings:
        return replace(self.settings, allowed_paths=paths)


def _parse_allow(spec: str) -> AllowedPath:
    """`PATH[:ro|:rw]` → an AllowedPath, resolved (symlinks too) and checked to exist."""
    path, read_only = spec, True
    head, sep, tail = spec.rpartition(":")
    if sep and tail in ("ro", "rw"):
        path, read_only = head, tail == "ro"
    if not path:
        raise SettingsError(f"--allow {spec!r}: give a path, e.g. --allow ./src:rw")
    resolved = os.path.realpath(os.path.expanduser(path))
    if not os.path.isdir(resolved):
        suffix = ""
        if sep and tail not in ("ro", "rw") and "/" not in tail:
            suffix = f" (if :{tail} was meant as a suffix: it is :ro or :rw)"
        raise SettingsError(
            f"--allow {spec!r}: {resolved} is not a directory{suffix}: give an existing one"
        )
    return AllowedPath(path=resolved, read_only=read_only)


def allowed_paths(specs: Sequence[str], default_dir: str) -> tuple[AllowedPath, ...]:
    """The paths of `--allow`, or `default_dir` read-write when none was given."""
    if not specs:
        return (AllowedPath(path=os.path.realpath(default_dir), read_only=False),)
    return tuple(_parse_allow(spec) for spec in specs)


def sandbox(spec: RunnerSpec) -> SandboxKind:
    """The kind `--sandbox` named, from the registry."""
    try:
        return sandbox_kind(spec.sandbox or DEFAULT_SANDBOX_KIND)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def sandbox_problem(spec: RunnerSpec) -> str | None:
    """Why the sandbox cannot run commands now, with the fix; None when it can."""
    return sandbox(spec).problem(spec.sandbox_settings())


def sandbox_where(spec: RunnerSpec) -> str:
    return sandbox(spec).where(spec.sandbox_settings())


def make_runner(spec: RunnerSpec) -> Runner:
    if not spec.sandbox:
        return LocalRunner()
    try:
        return sandbox(spec).open(spec.sandbox_settings())
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def system_prompt_for(
    spec: RunnerSpec,
    options: ExecOptions,
    extra: str = "",
    date: dt.date | None = None,
    style: PromptStyle = "full",
) -> str:
    """The system prompt in `style`, telling the model what the sandbox lets it see, how
    its jobs work and how to keep memory notes (as of `date`, by default today). Every
    runner keeps jobs; both fronts (the command, the server) answer the memory commands."""
    workdir = options.resolved_workdir() or os.getcwd()
    after = options.background_after_s
    commands = (*(job_usage(after) if after is not None else ()), *memory_usage())
    kind = sandbox(spec) if spec.sandbox else None
    return build_system_prompt(
        working_dir=workdir,
        platform=None if kind is None else kind.platform,
        date=date,
        extra=extra,
        loop_commands=commands,
        style=style,
        sandbox_note=""
        if kind is None
        else kind.prompt_note(spec.sandbox_settings(options.allowed_paths)),
    )
