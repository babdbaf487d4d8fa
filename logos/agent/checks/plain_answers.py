"""Once commands ran, an answer the model gave on its own is asked again from a plain view of
the task and the outputs (`logos.protocol.plain_answer`), in an answer turn.

WHY: a small model's own answer at the end of the conversation copies the worked example's
("Python: the directory holds setup.py") as often as it reads the outputs; asked from the
outputs alone, it reads them. Its own answer is not shown as it streams (`shown`): it would
only be read as an answer that is not the one.
"""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import answer_notice


class PlainAnswers:
    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or not run.ran_commands or run.turn == "answer" or run.last_turn:
            return None
        run.answer_due = True
        raise AskAgain(answer_notice(run.task))


def shown(run: RunState, turn_kind: str) -> bool:
    """Whether the next turn's prose streams to the caller: not a draft that, once commands
    ran, will be asked again from the outputs."""
    return not (run.ran_commands and turn_kind != "answer" and not run.last_turn)
