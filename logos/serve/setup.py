"""What the server is started with: everything resolved by its front end (the `logos serve`
command reads the config file, the environment and its flags, then hands this over).

The server package knows nothing of the command line: it gets its runners, the system
prompt and the run settings through `ServerSetup`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from logos.agent.config import Config
from logos.approvals.rules import ApprovalRules
from logos.commands.memory_store import MemoryStore
from logos.jsonl import utc_now
from logos.options import ExecOptions
from logos.options.declarations import (
    ALLOW,
    ALLOW_HOST,
    MAX_COST,
    MAX_STEPS,
    MAX_TIME,
    MAX_TOKENS,
    MAX_TOTAL_TOKENS,
    NETWORK,
    TIMEOUT,
)
from logos.options.narrowing import Ceiling
from logos.options.option import Option, Place
from logos.records.trajectory import RunHeader, Trajectory, TrajectoryWriter
from logos.runners.base import Runner
from logos.settings.serve_table import ServeSettings


@dataclass(frozen=True)
class RunnerChoice:
    """Where a request wants its commands run."""

    sandbox: bool
    network: bool = False
    allowed_hosts: tuple[str, ...] = ()
    """sandbox: the hosts its commands may reach with network off (for the system prompt)."""

    @property
    def kind(self) -> str:
        return "sandbox" if self.sandbox else "local"


class RunnerFactory(Protocol):
    """Opens runners the way the front end's settings say (the sandbox's socket, image…)."""

    def problem(self, choice: RunnerChoice) -> str | None:
        """Why commands cannot run there now, with the fix; None when they can."""
        ...

    def open(self, choice: RunnerChoice) -> Runner: ...

    def system_prompt(
        self, choice: RunnerChoice, options: ExecOptions, continued: Trajectory | None
    ) -> str:
        """The system prompt of a run: a new one with the memory notes, or the one
        `continued` recorded when only its date would differ."""
        ...


@dataclass(frozen=True)
class ModelInfo:
    """What a session's trajectory records about the model."""

    provider: str
    model: str
    base_url: str | None
    gguf: str | None


@dataclass(frozen=True)
class ServerSetup:
    settings: ServeSettings
    template: Config
    """The provider, the limits and the model settings of every run: a request may only
    narrow the limits. Its runner and system prompt are replaced per run."""
    model: ModelInfo
    runners: RunnerFactory
    state_dir: Path
    """The server's token, sessions and event logs."""
    audit_path: Path
    memory: MemoryStore
    rules: ApprovalRules | None
    logos_version: str
    workdir: str
    """Where local commands run unless a request names a directory."""

    @cached_property
    def ceiling(self) -> Ceiling:
        """What a request may narrow: the template's limits, and the paths the server was
        given (pinned when it started). Its sandbox's own config decides network and hosts."""
        template, options = self.template, self.template.exec_options
        widest: dict[Option[Any], object] = {
            MAX_STEPS: template.max_steps,
            MAX_COST: template.max_cost_usd,
            MAX_TIME: template.max_wall_s,
            MAX_TOKENS: template.max_tokens,
            MAX_TOTAL_TOKENS: template.max_total_tokens,
            TIMEOUT: options.timeout_s,
            NETWORK: None,
            ALLOW_HOST: None,
            ALLOW: None,
        }
        defaults: dict[Option[Any], object] = {
            NETWORK: False,
            ALLOW_HOST: options.allowed_hosts,
            ALLOW: options.allowed_paths,
        }
        return Ceiling.of(
            "this server",
            (Place.CONFIG_FILE,),
            widest,
            defaults=defaults,
            paths=options.path_ceiling,
        )

    def session_writer(
        self,
        path: Path,
        choice: RunnerChoice,
        workdir: str,
        system_prompt: str,
        continued: Trajectory | None,
    ) -> TrajectoryWriter:
        """The writer of a session: `continued` appended to, or a new one at `path` whose
        first record names this server's model and `choice`'s runner."""
        if continued is not None:
            return TrajectoryWriter.append_to(continued)
        model = self.model
        header = RunHeader(
            logos_version=self.logos_version,
            provider=model.provider,
            model=model.model,
            base_url=model.base_url,
            gguf=model.gguf,
            runner="sandbox" if choice.sandbox else "local",
            cwd=workdir,
            started_at=utc_now(),
            system_prompt=system_prompt,
        )
        return TrajectoryWriter.create(path, header)
