"""An answer given before any command wrote the file the task asks for, or made the change
to a file it asks for when the model's last command only printed it changed
(`logos.protocol.task_files`): the model is told so once, and the next turn must act."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import unwritten_file_notice
from logos.protocol.task_files import offered_write, unmade_edit, unwritten


class TaskFiles:
    def __init__(self) -> None:
        self.told = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or self.told or run.last_turn:
            return None
        missing = unwritten(run.task, run.results)
        if missing:
            name = missing[0]
            offered = offered_write(name, run.task, run.results)
        elif edit := unmade_edit(run.task, run.results):
            name, offered = edit
        else:
            return None
        self.told = True
        run.acted = run.answer_due = False
        raise AskAgain(unwritten_file_notice(name, offered))
