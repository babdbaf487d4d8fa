"""A reply that ran the very commands of the previous one to the very same output
(`logos.protocol.repetition`): said so, and with the llama.cpp grammars the next turn must
answer."""

from __future__ import annotations

from logos.agent.checks.base import RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import repeated_reply_notice
from logos.protocol.repetition import Repetition


class RepeatedReplies:
    def __init__(self, *, forced: bool) -> None:
        self.forced = forced
        """A grammar holds the next turn to an answer (`logos.protocol.grammar`)."""
        self.repetition = Repetition()

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if reply.is_answer:
            return None
        run.answer_due = self.repetition.repeats(reply.results)
        return repeated_reply_notice(self.forced, run.task) if run.answer_due else None
