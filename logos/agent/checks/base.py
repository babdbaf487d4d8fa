"""What every reply check shares: its one method, what it knows of the run, and the two ways
it can stop the loop's reading of a reply (ask again at once, end the run).

WHY exceptions: a check that asks again or ends the run says so where it decides, and the
loop catches both in one place (`run_checks`, `logos.agent.loop`), instead of flags threaded
through the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from logos.agent.checks.reply import Reply
from logos.agent.steps import StopReason
from logos.commands.run_jobs import RunJobs
from logos.protocol.answer_form import AnswerForm, requested_form
from logos.protocol.grammar import Turn
from logos.result import Result


class AskAgain(Exception):
    """The reply is answered now, with the notices so far and this one (if any); the checks
    after the one that raised do not read it."""

    def __init__(self, notice: str | None = None) -> None:
        super().__init__(notice)
        self.notice = notice


class EndRun(Exception):
    """The run ends here, for this reason (`RunResult.stop_reason`), with this error, or,
    when it ends "final", with this answer."""

    def __init__(self, reason: StopReason, error: str | None = None, answer: str = "") -> None:
        super().__init__(reason, error)
        self.reason: StopReason = reason
        self.error = error
        self.answer = answer


@dataclass
class RunState:
    """What the checks know of the run besides the reply they read, and what they decide
    about the next turn."""

    task: str
    jobs: RunJobs | None
    ran_commands: bool
    """Some reply of the conversation, its history included, held a block."""
    acted: bool
    """The last reply that ran commands had one succeed (or go on as a job), and none fell
    into a known trap (`logos.protocol.pitfalls`); a check may hold the next turn to acting."""
    answer_due: bool = False
    """The next turn must be an answer: held to one by the answer grammar and, with plain
    answers, asked from the outputs."""
    turn: Turn = "act"
    """The kind of turn the reply being read was asked for."""
    last_turn: bool = False
    """No turn is left after this one (`Config.max_steps`): a check that asks again would
    only lose the answer."""
    results: list[Result] = field(default_factory=list)
    """What this run's commands came to, in order."""
    held_to_form: bool = False
    """The next answer is held to the form the task asks (`form`), by its grammar."""
    answer_notes: list[str] = field(default_factory=list)
    """Said after the task when an answer is asked from the outputs
    (`logos.protocol.plain_answer`)."""

    @property
    def form(self) -> AnswerForm | None:
        """The form the task asks its answer to take (`logos.protocol.answer_form`)."""
        return requested_form(self.task)

    def outputs(self) -> str:
        """Everything this run's commands printed."""
        return "\n".join(f"{r.stdout}\n{r.stderr}" for r in self.results)

    def start_turn(self, *, last: bool) -> Turn:
        """Start a turn (`last`: no turn is left after it); the kind of turn to ask for
        (`logos.protocol.grammar`).

        WHY "act" until a command succeeded, and again after a reply whose commands all
        failed: a small model told its `sed -i` was refused, or shown an error, says the
        work is done; made to write a block, it runs the command the refusal offered, or
        fixes the one that failed."""
        self.last_turn = last
        self.turn = "answer" if self.answer_due else "reply" if self.acted else "act"
        return self.turn

    def answer_again(self, note: str, notice: str | None = None) -> NoReturn:
        """Have the answer asked again from the outputs, with `note` said after the task in
        that view (`answer_notes`) and `notice` in the conversation (`note` when None)."""
        self.answer_due = True
        self.answer_notes.append(note)
        raise AskAgain(note if notice is None else notice)

    def took(self, reply: Reply) -> None:
        """Count what the reply ran."""
        self.ran_commands = self.ran_commands or reply.blocks > 0
        self.results += reply.results
        if reply.results:
            self.acted = reply.acted


class ReplyCheck(Protocol):
    async def check(self, reply: Reply, run: RunState) -> str | None:
        """A notice for the model when the reply needs one, else None; raises `AskAgain` to
        have the reply answered at once, `EndRun` to end the run."""
        ...


@dataclass(frozen=True)
class Verdict:
    """What the loop does with a reply: answer it with its results and these notices, or,
    when `answer` is set, end the run with that answer."""

    notices: tuple[str, ...] = ()
    answer: str | None = None


async def run_checks(checks: Sequence[ReplyCheck], reply: Reply, run: RunState) -> Verdict:
    """Every check on `reply`, in order, until one asks again; `EndRun` goes through."""
    notices: list[str] = []
    try:
        for check in checks:
            notice = await check.check(reply, run)
            if notice:
                notices.append(notice)
    except AskAgain as ask:
        return Verdict((*notices, *([ask.notice] if ask.notice else [])))
    if notices or not reply.is_answer:
        return Verdict(tuple(notices))
    return Verdict(answer=reply.answer)
