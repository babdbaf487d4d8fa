"""An answer to "what does this project do?" that does not give what the project's manifest
says it does (`logos.protocol.project_description`) is asked once more from the outputs, told
the description; the answer given then stands. The description is told only in that
answer's view, held to prose: it is the project's own text, which the conversation already
shows once, as output."""

from __future__ import annotations

from logos.agent.checks.base import RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import project_description_note, project_description_notice
from logos.protocol.project_description import described


class ProjectDescription:
    def __init__(self) -> None:
        self.asked = False

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or run.last_turn or self.asked:
            return None
        description = described(run.task, run.results)
        if description is None or description.affirmed_in(reply.answer):
            return None
        self.asked = True
        run.answer_again(
            project_description_note(description), project_description_notice(description)
        )
