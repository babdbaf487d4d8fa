"""Notice when the model keeps running a command that keeps failing the same way.

Small models retry a failed command unchanged (`exit 1` four times, the same `rm out` again)
as if the next try could end differently. Once the same command has failed the same way
`ReplyPolicy.repeated_failure_note` times in a row, the envelope says so under its block.

* The same command: the same text once runs of whitespace are collapsed.
* The same way: the same exit code, signal, timeout, out-of-memory kill and runner error
  (a refusal by the policy is a runner error too).
* In a row: in consecutive turns that ran commands. A turn that ran commands without that
  failure ends the row; a turn that ran none (a corrective notice) neither counts nor ends
  it; the same failure twice in one reply counts once.
"""

from __future__ import annotations

from collections.abc import Sequence

from logos.protocol.notices import repeated_failure_note
from logos.protocol.repetition import Ending
from logos.result import Result


def _failure_of(result: Result) -> Ending | None:
    if result.ok or result.job is not None:  # a job has not ended, let alone failed
        return None
    return Ending.of(result)


class RepeatedFailures:
    """Counts each failure's row across the turns of one run."""

    def __init__(self, times: int) -> None:
        self._times = times
        self._rows: dict[Ending, int] = {}

    def notes(self, results: Sequence[Result]) -> dict[int, str]:
        """Take one turn's results; the notes for their blocks, by position in `results`."""
        if not results:
            return {}  # a turn that ran nothing leaves every row as it was
        failures = [_failure_of(result) for result in results]
        self._rows = {
            failure: self._rows.get(failure, 0) + 1 for failure in failures if failure is not None
        }
        notes = {}
        for position, failure in enumerate(failures):
            row = 0 if failure is None else self._rows[failure]
            if row >= self._times:
                notes[position] = repeated_failure_note(row)
        return notes
