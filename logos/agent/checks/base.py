"""What every reply check shares: its one method, what it knows of the run, and the two ways
it can stop the loop's reading of a reply (ask again at once, end the run).

WHY exceptions: a check that asks again or ends the run says so where it decides, and the
loop catches both in one place (`run_checks`, `logos.agent.loop`), instead of flags threaded
through the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from logos.agent.checks.reply import Reply
from logos.agent.steps import StopReason
from logos.commands.run_jobs import RunJobs
from logos.protocol.grammar import Turn


class AskAgain(Exception):
    """The reply is answered now, with the notices so far and this one (if any); the checks
    after the one that raised do not read it."""

    def __init__(self, notice: str | None = None) -> None:
        super().__init__(notice)
        self.notice = notice


class EndRun(Exception):
    """The run ends here, for this reason (`RunResult.stop_reason`), with this error."""

    def __init__(self, reason: StopReason, error: str | None = None) -> None:
        super().__init__(reason, error)
        self.reason: StopReason = reason
        self.error = error


@dataclass
class RunState:
    """What the checks know of the run besides the reply they read, and what they decide
    about the next turn."""

    task: str
    jobs: RunJobs | None
    ran_commands: bool
    """Some reply of the conversation, its history included, held a block."""
    acted: bool
    """The last reply that ran commands had one succeed (or go on as a job) into no known
    trap (`logos.protocol.pitfalls`)."""
    answer_due: bool = False
    """The next turn must be an answer: held to one by the answer grammar and, with plain
    answers, asked from the outputs."""
    turn: Turn = "act"
    """The kind of turn the reply being read was asked for."""
    last_turn: bool = False
    """No turn is left after this one (`Config.max_steps`): a check that asks again would
    only lose the answer."""

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

    def took(self, reply: Reply) -> None:
        """Count what the reply ran."""
        self.ran_commands = self.ran_commands or reply.blocks > 0
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
