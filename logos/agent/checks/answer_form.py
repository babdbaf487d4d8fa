"""An answer that does not have the form the task asks for (`logos.protocol.answer_form`):
reduced to the bare value the task asks for when it states one the outputs show, else asked
once more, from the outputs, held to the form (its grammar, with the llama.cpp grammars on);
the answer given then stands."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, EndRun, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import answer_form_notice


class AnswerForms:
    def __init__(self) -> None:
        self.asked = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        form = run.form
        if form is None or not reply.is_answer or form.holds(reply.answer):
            return None
        reduced = form.reduced(reply.answer, run.task, run.outputs())
        if reduced is not None:
            raise EndRun("final", answer=reduced)
        if self.asked or run.last_turn:
            return None
        self.asked = True
        run.answer_due = run.held_to_form = True
        raise AskAgain(answer_form_notice(run.task))
