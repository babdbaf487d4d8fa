"""The states a person is shown, told as they are: a project whose command waits for an
approval is waiting, one whose handoff a guard holds is held (both wait for the person,
not for an agent), one with a turn running or a message about to be taken is busy; an
agent whose command waits is waiting. And where an agent's commands run, in words."""

from __future__ import annotations

from typing import Literal, TypeAlias

from logos.options import described_paths
from logos.serve.projects.wire import AgentRecord, ProjectRecord

ProjectState: TypeAlias = Literal["waiting", "held", "busy", "paused", "idle"]
AgentState: TypeAlias = Literal["waiting", "busy", "idle", "stopped"]


def project_state(record: ProjectRecord, in_turn: bool) -> ProjectState:
    """waiting (a command asks the person) > held (a guard asks the person) > busy (a turn
    runs, or a message is about to start one) > paused > idle."""
    if record.approvals:
        return "waiting"
    if record.held is not None:
        return "held"
    if in_turn or (record.queue and not record.paused):
        return "busy"
    if record.paused:
        return "paused"
    return "idle"


def agent_state(agent: AgentRecord, record: ProjectRecord) -> AgentState:
    if agent.status != "stopped" and any(a.agent == agent.name for a in record.approvals):
        return "waiting"
    return agent.status


def agent_place(agent: AgentRecord) -> str:
    """Where the agent's commands run, as the roster and its command cards say it."""
    if agent.runner_kind == "local":
        first = agent.allowed_paths[0].path if agent.allowed_paths else "the server's directory"
        return f"local bash on this machine, in {first}"
    if agent.network:
        network = "every host"
    elif agent.allowed_hosts:
        network = "only " + ", ".join(agent.allowed_hosts)
    else:
        network = "no network"
    return f"{agent.name}'s sandbox: sees {described_paths(agent.allowed_paths)}; {network}"
