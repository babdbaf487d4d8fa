"""A project's events: what its event log holds and its stream sends, one numbered
sequence for the whole chat. An agent's run events (deltas, commands, approvals) are
folded into the id of the message they belong to."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from logos.serve.projects.wire import AgentStatus, SavedApproval, Spend

MessageKind: TypeAlias = Literal["user", "agent", "note", "briefing"]
MessageStatus: TypeAlias = Literal["complete", "stopped", "failed", "cut"]
TurnState: TypeAlias = Literal[
    "started", "answered", "held", "stopped", "failed", "budget", "interrupted", "no-agent"
]


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ProjectChanged(_Event):
    type: Literal["project"] = "project"
    change: str
    """created, paused, resumed, goal, progress, settings."""
    name: str
    goal: str
    progress: str
    paused: bool


class AgentChanged(_Event):
    type: Literal["agent"] = "agent"
    agent: str
    role: str
    status: AgentStatus | Literal["removed"]
    change: str
    """created, started, stopped, busy, idle, removed, promoted."""


class ChatMessage(_Event):
    """A whole message: the person's, a note of logos's, or a briefing sent to an agent."""

    type: Literal["message"] = "message"
    id: str
    author: str
    kind: MessageKind
    text: str
    to: str | None = None


class MessageStart(_Event):
    """An agent starts its reply; its deltas and commands follow under `id`."""

    type: Literal["message_start"] = "message_start"
    id: str
    author: str
    answering: str
    """The message it answers."""


class MessageDelta(_Event):
    type: Literal["delta"] = "delta"
    message: str
    text: str


class CommandActivity(_Event):
    """One of the agent's run events about a command (`logos.records.events`)."""

    type: Literal["command"] = "command"
    message: str
    agent: str
    event: dict[str, Any]


class MessageEnd(_Event):
    type: Literal["message_end"] = "message_end"
    id: str
    author: str
    text: str
    """The reply as the chat keeps it (for one cut short: what was streamed)."""
    status: MessageStatus
    reason: str = ""
    """Why it is not complete: the stop reason, or the error."""
    commands: list[str] = Field(default_factory=list)
    tokens: int = 0
    cost_usd: float | None = None
    listening: bool = False


class Routing(_Event):
    type: Literal["routing"] = "routing"
    message: str
    """The message routed."""
    agent: str | None
    reason: str


class TurnChanged(_Event):
    type: Literal["turn"] = "turn"
    message: str
    """The user message whose turn it is."""
    state: TurnState
    reason: str = ""


class GuardTripped(_Event):
    type: Literal["guard"] = "guard"
    message: str
    reason: str
    source: str
    target: str
    options: list[str] = Field(default_factory=lambda: ["continue", "stop", "pick"])


class BudgetUpdate(_Event):
    type: Literal["budget"] = "budget"
    project: Spend
    turn: Spend
    agent: str | None = None
    agent_spent: Spend | None = None
    live: bool = False
    """With a call still running (its spend so far included); else after a call ended."""


class ApprovalAsked(_Event):
    type: Literal["approval_required"] = "approval_required"
    id: str
    agent: str
    message: str
    command: str
    summary: str
    expires_at: str | None = None
    live: bool = True

    @classmethod
    def of(cls, saved: SavedApproval, expires_at: str | None = None) -> ApprovalAsked:
        return cls(**saved.model_dump(), expires_at=expires_at)


class ApprovalDecided(_Event):
    type: Literal["approval_decided"] = "approval_decided"
    id: str | None
    agent: str
    message: str
    action: str
    command: str
    reason: str | None = None


class Resume(_Event):
    """Said to a client that fell behind, just before its stream ends."""

    type: Literal["resume"] = "resume"
    after: int
