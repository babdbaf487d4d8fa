"""An answer to a task that asks which file holds a word, given before any command searched
the files for it (`logos.protocol.searched_word`): the model is handed the search once, and
the next turn must act. Once a search ran, an answer asked again from the outputs is asked
beside what the search printed.

WHY before the other checks of an answer: the file a task asks to copy or name is not known
until the search ran, so a check that would have the file written, or the answer asked from
the outputs, would only have a name read off a listing written or asked again.
"""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import searched_note, unsearched_notice
from logos.protocol.searched_word import search_for, sought_word


class SearchedWord:
    def __init__(self) -> None:
        self.sent = False
        self.noted = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or run.last_turn:
            return None
        sought = sought_word(run.task)
        if sought is None:
            return None
        search = search_for(sought.word, run.results)
        if search is not None:
            if not self.noted:
                self.noted = True
                run.answer_notes.append(searched_note(sought.word, search.stdout))
            return None
        if self.sent:
            return None
        self.sent = True
        run.acted = run.answer_due = False
        raise AskAgain(unsearched_notice(sought.word, sought.command))
