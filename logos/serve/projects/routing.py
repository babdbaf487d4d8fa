"""Who answers a message, and why: pure decisions over the roster.

For the person's message: an agent it names (`@name`) > the agent that claimed the next
message (its reply ended with the listening marker) > the captain. For an agent's reply:
the agent its first directive names, or nobody (the turn ends). Every decision carries the
reason the chat shows, and notes for what was asked and could not be done.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from logos.serve.projects.directives import Directive, directives


@dataclass(frozen=True)
class Decision:
    agent: str | None
    """Who answers; None: nobody can (no captain, or every agent stopped)."""
    reason: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Said in the chat before the answer: a name that is no agent, a stopped agent…"""
    directive: Directive | None = None


def route_user_message(
    text: str,
    *,
    agents: Collection[str],
    available: Collection[str],
    captain: str | None,
    listening: str | None,
) -> Decision:
    """`agents`: every agent's name; `available`: those that may answer (not stopped)."""
    notes: list[str] = []
    for directive in directives(text):
        if directive.target in available:
            return Decision(
                directive.target, f"@{directive.target} named by the user", directive=directive
            )
        if directive.target in agents:
            notes.append(
                f"@{directive.target} is stopped: start it to address it; passed on instead"
            )
        else:
            notes.append(
                f"@{directive.target} is no agent of this project (agents: "
                f"{', '.join(sorted(agents)) or 'none'}); passed on instead"
            )
        break  # WHY only the first: one respondent per message
    if listening is not None and listening in available:
        return Decision(
            listening, f"{listening} asked a question and claimed the next message", tuple(notes)
        )
    if captain is not None and captain in available:
        return Decision(captain, "captain by default", tuple(notes))
    why = "the captain is stopped" if captain is not None else "the project has no captain"
    return Decision(None, f"nobody can answer: {why}", tuple(notes))


def route_handoff(
    author: str, text: str, *, agents: Collection[str], available: Collection[str]
) -> Decision:
    """Where an agent's reply goes next: its first directive that names another agent
    that may answer; None when it names nobody (the turn ends with this reply)."""
    notes: list[str] = []
    for directive in directives(text):
        target = directive.target
        if target == author:
            notes.append(f"{author} named itself (@{target}): a handoff goes to another agent")
            continue
        if target in ("user", "you", "all", "everyone"):
            continue  # WHY: addressing the person (or all) is no handoff
        if target not in agents:
            notes.append(f"{author} handed off to @{target}, which is no agent of this project")
            continue
        if target not in available:
            notes.append(f"{author} handed off to @{target}, which is stopped")
            continue
        why = f"@{target} named by {author}" + (f": {directive.note}" if directive.note else "")
        return Decision(target, why, tuple(notes), directive)
    return Decision(None, f"{author} answered (no handoff)", tuple(notes))
