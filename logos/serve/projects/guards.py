"""Guards over one user turn: stop a team going round in circles, and ask the person.

Within a turn, logos keeps the handoff graph. A handoff trips the guard when its edge was
taken before in the turn (A→B→A→B: a talon reporting back to its captain is fine, the
captain handing the same talon work again is a loop), when the reply handing off is
identical to an earlier reply of the turn, or when the agents have handed off `idle_hops`
times in a row without running a command. Hop and round caps are the last
resort. Pure: the engine asks, and holds the handoff for the person when told why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DIRECTIVE = re.compile(r"^[ \t]*@\S+", re.MULTILINE)
"""A line's leading `@name`: a reply handed to someone else is the same reply."""

_IDLE_HOPS = 3
"""Handoffs in a row whose author ran no command that go on; the next asks the person."""


@dataclass
class TurnGuard:
    max_hops: int
    max_rounds: int
    idle_hops: int = _IDLE_HOPS
    edges: list[tuple[str, str]] = field(default_factory=list)
    replies: dict[str, str] = field(default_factory=dict)
    """Normalised reply → its author, for the identical-reply guard."""
    rounds: dict[str, int] = field(default_factory=dict)
    idle_in_a_row: int = 0

    def answered(self, agent: str) -> None:
        self.rounds[agent] = self.rounds.get(agent, 0) + 1

    def reply(self, agent: str, text: str, ran_commands: bool) -> str | None:
        """Record a reply; why it trips the guard when it repeats an earlier one."""
        self.idle_in_a_row = 0 if ran_commands else self.idle_in_a_row + 1
        key = " ".join(_DIRECTIVE.sub("", text).split()).lower()
        if not key:
            return None
        earlier = self.replies.get(key)
        self.replies.setdefault(key, agent)
        if earlier is not None:
            who = "its own" if earlier == agent else f"{earlier}'s"
            return f"{agent}'s reply is identical to {who} earlier reply in this turn"
        return None

    def handoff(self, source: str, target: str) -> str | None:
        """Why the handoff source → target must wait for the person, or None to go on."""
        edge = (source, target)
        try:
            if edge in self.edges:
                return f"{source} → {target} again: the same handoff twice in one turn"
            if self.idle_in_a_row > self.idle_hops:
                return (
                    f"{self.idle_in_a_row} handoffs in a row without a command: the agents "
                    "are talking, not working"
                )
            if len(self.edges) >= self.max_hops:
                return f"{len(self.edges)} handoffs in this turn, the most max_hops allows"
            if self.rounds.get(target, 0) >= self.max_rounds:
                return (
                    f"{target} answered {self.rounds[target]} times in this turn, the most "
                    "max_rounds allows"
                )
            return None
        finally:
            self.edges.append(edge)

    def allow(self, source: str, target: str) -> None:
        """The person said go on: the held handoff's guard is spent (and the idle count)."""
        self.idle_in_a_row = 0
        self.rounds[target] = 0
