"""An answer that names a language, a framework or a test command no output showed
(`logos.protocol.facts`): when a listing shows a README or manifest no command read, the
model is sent to read it (the next turn must act); else the answer is asked once more from
the outputs, told to name only what they show. The answer given after that stands."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.facts import unshown_facts
from logos.protocol.first_look import unread_look
from logos.protocol.notices import read_instead_notice, unshown_facts_note


class GroundedFacts:
    def __init__(self) -> None:
        self.sent_to_read = False
        self.asked_again = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or run.last_turn or self.asked_again:
            return None
        commands = "\n".join(result.command for result in run.results)
        unshown = unshown_facts(reply.answer, f"{run.task}\n{commands}\n{run.outputs()}")
        if not unshown:
            return None
        named = ", ".join(unshown)
        look = None if self.sent_to_read else unread_look(run.results)
        if look is not None:
            self.sent_to_read = True
            run.acted = run.answer_due = False
            raise AskAgain(read_instead_notice(named, look))
        self.asked_again = True
        run.answer_again(unshown_facts_note(named))
