"""What project requests may hold (unknown fields are refused) and what a project saves:
pydantic models, because both cross a process boundary (HTTP, the state file)."""

from __future__ import annotations

import re
from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator

from logos.approvals.approval import ApprovalMode
from logos.options.declarations import options_at
from logos.options.option import Place, fields_at, with_options

NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
"""An agent's name: what `@name` addresses, so no spaces and no capitals."""
_MAX_MESSAGE_CHARS = 50_000
_MAX_TEMPLATE_CHARS = 20_000

Role: TypeAlias = Literal["captain", "talon"]
DoubleTexting: TypeAlias = Literal["queue", "inject", "interrupt"]
AgentStatus: TypeAlias = Literal["idle", "busy", "stopped"]
GuardAction: TypeAlias = Literal["continue", "stop", "pick"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetRequest(_Request):
    """Limits that nest: the project's, each user turn's within it, each agent call's within
    the turn. None: no limit at that level (the levels above still hold)."""

    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)
    turn_max_tokens: int | None = Field(default=None, ge=1)
    turn_max_cost_usd: float | None = Field(default=None, gt=0)
    turn_max_wall_s: float | None = Field(default=None, gt=0)
    call_max_tokens: int | None = Field(default=None, ge=1)
    call_max_cost_usd: float | None = Field(default=None, gt=0)
    call_max_wall_s: float | None = Field(default=None, gt=0)


class BriefingTemplates(_Request):
    """Replace the shipped briefing of a role (`prompts/project-<role>.md`)."""

    captain: str | None = Field(default=None, max_length=_MAX_TEMPLATE_CHARS)
    talon: str | None = Field(default=None, max_length=_MAX_TEMPLATE_CHARS)


class ProjectFields(_Request):
    """A project; with the options it grants its agents, at most (`Place.PROJECT`: its
    paths, the first the default working directory, by default the server's working
    directory, writable; the hosts a sandboxed agent may reach)."""

    name: str = Field(min_length=1, max_length=120)
    goal: str = Field(default="", max_length=4_000)
    description: str = Field(default="", max_length=20_000)
    budget: BudgetRequest = Field(default_factory=BudgetRequest)
    double_texting: DoubleTexting = "queue"
    """A message sent while a turn runs: queued for its own turn, injected into the running
    turn at its next handoff, or interrupting the turn."""
    max_hops: int = Field(default=8, ge=1, le=100)
    """Handoffs within one user turn, at most: the last resort after the guards."""
    max_rounds: int = Field(default=3, ge=1, le=50)
    """Times one agent answers within one user turn, at most."""
    context_tokens: int = Field(default=4_000, ge=200, le=200_000)
    """The most of the chat an agent is sent at once; older messages are counted, not sent."""
    briefings: BriefingTemplates = Field(default_factory=BriefingTemplates)


ProjectRequest = with_options(ProjectFields, Place.PROJECT, options_at(Place.PROJECT))


class ProjectChange(_Request):
    """PATCH: the goal and the progress the person (or a front) records."""

    goal: str | None = Field(default=None, max_length=4_000)
    progress: str | None = Field(default=None, max_length=4_000)
    double_texting: DoubleTexting | None = None


class AgentRunnerFields(_Request):
    """Where an agent's commands run; with what its runner may ask for
    (`Place.AGENT_RUNNER`: paths, by default the project's, and hosts, each within the
    project's; network), unless the person grants more."""

    kind: Literal["local", "sandbox"] = "local"


AgentRunner = Annotated[
    AgentRunnerFields,
    fields_at(AgentRunnerFields, Place.AGENT_RUNNER, options_at(Place.AGENT_RUNNER)),
]


class ModelFields(_Request):
    """What an agent's model may be asked (`Place.AGENT_MODEL`: its limits only narrow the
    server's)."""


ModelSettings = Annotated[
    ModelFields, fields_at(ModelFields, Place.AGENT_MODEL, options_at(Place.AGENT_MODEL))
]


class AgentRequest(_Request):
    name: str = Field(max_length=200)
    role: Role = "talon"
    model: ModelSettings = Field(default_factory=dict, validate_default=True)
    runner: AgentRunner = Field(default_factory=dict, validate_default=True)
    approval: ApprovalMode | None = None
    """Default: confirm for local commands, auto in the sandbox."""
    grant: bool = False
    """Let this agent's paths and hosts reach beyond the project's: recorded in the chat
    and the audit log."""

    @field_validator("name")
    @classmethod
    def _addressable(cls, name: str) -> str:
        if re.fullmatch(NAME_PATTERN, name) is None:
            raise ValueError(
                f"{name[:40]!r} cannot be addressed as @name: use lower-case letters, digits, "
                "- and _, starting with a letter, at most 32 characters (e.g. talon-1)"
            )
        return name


class MessageRequest(_Request):
    text: str = Field(min_length=1, max_length=_MAX_MESSAGE_CHARS)


class StopRequest(_Request):
    scope: Literal["turn", "project"] = "turn"


class GuardAnswer(_Request):
    action: GuardAction
    agent: str | None = None
    """With `pick`: who answers instead."""


class ProjectApprovalAnswer(_Request):
    approve: bool
    reason: str | None = Field(default=None, max_length=2_000)
    always: bool = False
    """Approve, and allow commands like this one from now on (an approval rule)."""


# What a project saves ------------------------------------------------------------------------


class _Saved(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SavedPath(_Saved):
    """A path granted to a project or an agent, pinned when it was granted (logos.ceiling):
    its device and inode then, None in a project saved before paths were pinned (the server
    pins those when it loads them)."""

    path: str
    read_only: bool
    device: int | None = None
    inode: int | None = None


class Spend(_Saved):
    tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    wall_s: float = 0.0


class AgentRecord(_Saved):
    name: str
    role: Role
    model: ModelSettings
    runner_kind: Literal["local", "sandbox"]
    allowed_paths: list[SavedPath]
    allowed_hosts: list[str]
    network: bool
    approval: ApprovalMode
    granted: bool = False
    status: AgentStatus = "idle"
    briefed: bool = False
    seen: int = 0
    """The chat's sequence number up to which this agent has been sent what happened."""
    spent: Spend = Field(default_factory=Spend)
    created_at: str


class ChatEntry(_Saved):
    """One message of the chat, as the agents are told it."""

    seq: int
    id: str
    author: str
    """`user`, an agent's name, or `logos` for a note."""
    text: str
    commands: list[str] = Field(default_factory=list)
    """An agent's commands, each summarised in a line (others see only this)."""


class QueuedMessage(_Saved):
    id: str
    text: str
    to: str | None = None
    """Who answers, decided already (a handoff the person let go on, a resumed approval)."""
    why: str | None = None


class HeldHandoff(_Saved):
    """A handoff a guard stopped: it waits for the person's answer."""

    source: str
    target: str
    text: str
    why: str


class SavedApproval(_Saved):
    id: str
    agent: str
    command: str
    summary: str
    message: str
    live: bool = True
    """False after a restart: approving it asks the agent to run the command again."""


class ProjectRecord(_Saved):
    id: str
    name: str
    goal: str
    description: str
    progress: str = ""
    budget: BudgetRequest
    allowed_paths: list[SavedPath]
    allowed_hosts: list[str]
    double_texting: DoubleTexting
    max_hops: int
    max_rounds: int
    context_tokens: int
    briefings: BriefingTemplates
    paused: bool = False
    created_at: str
    agents: list[AgentRecord] = Field(default_factory=list)
    listening: str | None = None
    """The agent whose last reply claimed the person's next message."""
    queue: list[QueuedMessage] = Field(default_factory=list)
    in_turn: QueuedMessage | None = None
    """The user message whose turn is running (a restart ends it with a note)."""
    injected: list[QueuedMessage] = Field(default_factory=list)
    """Messages sent into the running turn: queued after it unless an agent read them."""
    held: HeldHandoff | None = None
    approvals: list[SavedApproval] = Field(default_factory=list)
    spent: Spend = Field(default_factory=Spend)

    def agent(self, name: str) -> AgentRecord | None:
        return next((agent for agent in self.agents if agent.name == name), None)

    @property
    def captain(self) -> AgentRecord | None:
        return next((agent for agent in self.agents if agent.role == "captain"), None)
