"""An answer from a conversation that has run no command: asked once whether the task needs
one. Small models answer questions about this machine from guesses; the answer given again
stands."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import CHECK_BACK_NOTICE


class CheckBack:
    def __init__(self) -> None:
        self.asked = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        # WHY not on the last turn: with no turn left to answer it, it would lose the answer.
        if not reply.is_answer or run.ran_commands or self.asked or run.last_turn:
            return None
        self.asked = True
        raise AskAgain(CHECK_BACK_NOTICE)
