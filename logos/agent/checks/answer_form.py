"""An answer that does not have the form the task asks for (`logos.protocol.answer_form`):
reduced to the bare value the task asks for when it states one the outputs show, else asked
once more, from the outputs, held to the form (its grammar, with the llama.cpp grammars on);
the answer given then stands, but for a bare number no output shows, when the outputs hold
one number alone (`logos.protocol.asked_number`): that number is the answer.

WHY: under the number grammar the default model glued the digits of several numbers it read
into one (`154282311`); a command that printed one number alone printed the value asked
for."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, EndRun, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.answer_form import NUMBER_IN_TEXT
from logos.protocol.asked_number import lone_numbers
from logos.protocol.notices import answer_form_notice


class AnswerForms:
    def __init__(self) -> None:
        self.asked = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        form = run.form
        if form is None or not reply.is_answer:
            return None
        if form.holds(reply.answer):
            if form.kind == "number" and run.held_to_form:
                unshown = _unshown_number(reply.answer, run)
                if unshown is not None:
                    raise EndRun("final", answer=unshown)
            return None
        reduced = form.reduced(reply.answer, run.task, run.outputs())
        if reduced is not None:
            raise EndRun("final", answer=reduced)
        if self.asked or run.last_turn:
            return None
        self.asked = True
        run.answer_due = run.held_to_form = True
        raise AskAgain(answer_form_notice(run.task))


def _unshown_number(answer: str, run: RunState) -> str | None:
    """For a bare number asked again under the number grammar that no output shows: the one
    number the outputs hold alone, if there is one."""
    if answer.strip().strip("`*\"' .") in NUMBER_IN_TEXT.findall(run.outputs()):
        return None
    alone = set(lone_numbers(run.results, run.task))
    return alone.pop() if len(alone) == 1 else None
