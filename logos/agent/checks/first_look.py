"""A look that failed for a file that is not there, while the task names the file to read
or a listing shows a README or manifest (`logos.protocol.first_look`): the model is handed
the command that reads it, and the next turn must act. Measured with the default 0.5B
model on a repository with no README: it answered from the listing alone, inventing the
framework. With nothing to read instead, a directory the task names that a listing shows is
handed over to look into."""

from __future__ import annotations

from logos.agent.checks.base import RunState
from logos.agent.checks.reply import Reply
from logos.protocol.first_look import next_look, unlisted_directory
from logos.protocol.notices import list_instead_notice, missing_look_notice


class FirstLook:
    def __init__(self) -> None:
        self.missed: set[str] = set()
        """Each missed file is answered once: a model that reads something else is not
        held, and one that read the README it was handed is not sent on to a manifest."""

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.results:
            return None
        look = next_look(run.results, run.task)
        if look is not None:
            missed, notice = look[0], missing_look_notice(*look)
        elif listed := unlisted_directory(run.results, run.task):
            missed, notice = listed[1], list_instead_notice(*listed)
        else:
            return None
        if missed in self.missed:
            return None
        self.missed.add(missed)
        run.acted = run.answer_due = False
        return notice
