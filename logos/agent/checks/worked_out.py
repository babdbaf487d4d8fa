"""An answer to a question that asks for a number, given before any command printed a
number alone (`logos.protocol.asked_number`): the model is sent back once to work it out
with a command (handed one from its own last command when that is surely what it meant),
and the next turn must act.

WHY before the answer is asked from the outputs: no reading of a list of lines gives the
count a small model is asked for; only a command that counts does."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.asked_number import asks_for_number, lone_numbers, offered
from logos.protocol.notices import unworked_number_notice


class WorkedOut:
    def __init__(self) -> None:
        self.sent = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or not run.ran_commands or self.sent or run.last_turn:
            return None
        if not asks_for_number(run.task) or lone_numbers(run.results, run.task):
            return None
        self.sent = True
        run.acted = run.answer_due = False
        raise AskAgain(unworked_number_notice(offered(run.task, run.results)))
