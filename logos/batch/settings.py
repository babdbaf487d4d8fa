"""What every task of a batch runs with, as plain data: a cluster node gets a copy and builds
its own provider and runner from it."""

from __future__ import annotations

from dataclasses import dataclass, field

from logos.agent.config import ReplySettings, RunLimits
from logos.options import DEFAULT_TIMEOUT_S
from logos.providers.base import Provider
from logos.providers.registry import provider_kind
from logos.runners.sandboxes import SandboxSettings


@dataclass(frozen=True)
class ModelSpec:
    """The model every task talks to."""

    provider: str
    """A name in the provider registry."""
    model: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    """Sent to the nodes with the tasks (never printed)."""

    def open(self) -> Provider:
        """A new provider for this model; the caller closes it."""
        # WHY "" rather than None: None would make the provider read its default key
        # variable, on a node whose environment is not the user's.
        return provider_kind(self.provider).factory(
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key or "",
            context_window=None,
            retry=None,
        )


@dataclass(frozen=True)
class BatchSandbox:
    """The sandbox every task runs in."""

    kind: str
    """The kind's name: each node looks it up in its own registry (a kind object need not
    travel to a cluster node)."""
    settings: SandboxSettings


@dataclass(frozen=True)
class BatchSettings:
    """The defaults every task runs with; a task's own limits and image win."""

    model: ModelSpec
    sandbox: BatchSandbox | None = None
    """None: commands run with local bash, in the task's workspace."""
    limits: RunLimits = field(default_factory=RunLimits)
    """A task's own max_steps, max_time and max_cost win."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Each command's time limit: the agent's, the setup's and the check's."""
    replies: ReplySettings = field(default_factory=ReplySettings)
    """The reply policy and extra request fields (`logos.agent.config.ReplySettings`)."""
    prompt_extra: str = ""
    prepare: str | None = None
    """A command run once, before the tasks, in a sandbox session of its own: each task's
    session starts from a copy of what it changed outside its paths (/tmp and $HOME), its
    own workspace mounted (logos.batch.prepared). None: every task starts afresh."""
    keep_workspaces: bool = False
    """Leave each workspace on disk after its task (by default it is removed: the
    trajectory keeps what happened)."""
