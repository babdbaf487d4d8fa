"""An answer given before any command wrote the file the task asks for
(`logos.protocol.task_files`): the model is told so once, and the next turn must act."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import unwritten_file_notice
from logos.protocol.task_files import offered_write, unwritten


class TaskFiles:
    def __init__(self) -> None:
        self.told = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or self.told or run.last_turn:
            return None
        missing = unwritten(run.task, run.results)
        if not missing:
            return None
        self.told = True
        run.acted = run.answer_due = False
        name = missing[0]
        raise AskAgain(unwritten_file_notice(name, offered_write(name, run.task, run.results)))
