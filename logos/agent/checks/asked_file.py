"""An answer to a task that asks which file (the one that holds a word, the largest, the
newest, …), given before any command picked the file out (`logos.protocol.asked_file`): the
model is handed the command once, and the next turn must act. Once one did, an answer asked
again from the outputs is asked beside the names it printed.

WHY before the other checks of an answer: the file a task asks to copy or name is not known
until a command picked it out, so a check that would have the file written, or the answer
asked from the outputs, would only have a name read off a listing written or asked again.
"""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.asked_file import asked_file
from logos.protocol.notices import picked_file_note, unpicked_file_notice


class AskedFiles:
    def __init__(self) -> None:
        self.sent = False
        self.noted = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or run.last_turn:
            return None
        asked = asked_file(run.task)
        if asked is None:
            return None
        picked = asked.picked(run.results)
        if picked is not None:
            names = asked.printed_names(picked)
            if not self.noted and (names or not picked.stdout.strip()):
                self.noted = True
                run.answer_notes.append(picked_file_note(asked.asked, names))
            return None
        if self.sent:
            return None
        self.sent = True
        run.acted = run.answer_due = False
        raise AskAgain(unpicked_file_notice(asked.asked, asked.command))
