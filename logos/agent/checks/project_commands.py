"""An answer to a how-to question ("how do I run the tests?") that names none of the commands
the project's files give for it (`logos.protocol.project_commands`) is asked once more from
the outputs, told those commands; the answer given then stands. The commands are told only
in that answer's view, held to prose: the conversation names where they are."""

from __future__ import annotations

from logos.agent.checks.base import RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import project_commands_note, project_commands_notice
from logos.protocol.project_commands import commands_for


class ProjectCommands:
    def __init__(self) -> None:
        self.asked = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or run.last_turn or self.asked:
            return None
        given = commands_for(run.task, run.results)
        if not given or any(command.named_in(reply.answer) for command in given):
            return None
        self.asked = True
        run.answer_again(project_commands_note(given), project_commands_notice(given))
