"""Notice when the model runs the very commands of its previous reply to the very same output.

Small models loop: `ls -l data/*.csv`, the four files, `ls -l data/*.csv` again, until the
step limit. Nothing can come of a third run that the second did not show, so the loop says
so (`logos.protocol.notices.repeated_reply_notice`) and, with the llama.cpp grammars on, makes the
next reply an answer (`logos.protocol.grammar.ANSWER_GRAMMAR`).

* The very commands: the same blocks in the same order, once runs of whitespace are
  collapsed.
* The same output: the same exit code, signal, timeout, out-of-memory kill, runner error,
  stdout and stderr. A command whose output changed (a file it reads was edited between the
  runs) is not a repetition. A command that failed is compared by how it failed, not by its
  output: the default model ran `pytest` twenty times in a Rust crate until its time ran
  out, and every run printed another duration ("no tests ran in 0.01s"); nothing ran between
  two of them that could make the next end otherwise.
* The previous reply: the last one that ran commands; a reply that ran none (a corrective
  notice) is skipped over. A command still running as a job has no outcome yet: a reply
  that started one is never a repetition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from logos.result import Result


@dataclass(frozen=True)
class Ending:
    """How one command ended, comparable across replies: its text with runs of whitespace
    collapsed, its exit code, signal, timeout, out-of-memory kill and runner error."""

    command: str
    exit_code: int | None
    signal: int | None
    timed_out: bool
    oom_killed: bool
    error: str | None

    @classmethod
    def of(cls, result: Result) -> Ending:
        return cls(
            " ".join(result.command.split()),
            result.exit_code,
            result.signal,
            result.timed_out,
            result.oom_killed,
            result.error,
        )


_Outcome = tuple[Ending, str, str]
"""How a command ended, and its stdout and stderr."""


def _outcome(result: Result) -> _Outcome:
    if not result.ok:
        return Ending.of(result), "", ""
    return Ending.of(result), result.stdout, result.stderr


class Repetition:
    """Remembers the last reply's outcomes across the turns of one run."""

    def __init__(self) -> None:
        self._last: tuple[_Outcome, ...] | None = None

    def repeats(self, results: Sequence[Result]) -> bool:
        """Take one reply's results: whether they repeat the last reply that ran commands."""
        if not results:
            return False  # a reply that ran nothing is skipped over
        if any(result.job is not None for result in results):
            self._last = None
            return False
        outcomes = tuple(_outcome(result) for result in results)
        repeated = outcomes == self._last
        self._last = outcomes
        return repeated
