"""The small-task suite judges fairly: every check passes on the task's reference solution
(run with real bash), fails on the untouched directory, and takes no dump of candidates for
an answer; a try's outcome class follows from how the run stopped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.small_model import (
    DONE,
    ERROR,
    LOOP_LIMIT,
    MALFORMED,
    NO_COMMAND,
    RIGHT_GUESS,
    TIME_LIMIT,
    WRONG,
    classify,
)
from bench.small_tasks import TASKS, SmallTask, says

KINDS = {"count", "find", "create", "copy", "sum", "edit", "two-step"}


def test_the_suite_has_every_kind_and_enough_tasks() -> None:
    assert len(TASKS) >= 25
    assert {task.kind for task in TASKS} == KINDS
    assert len({task.id for task in TASKS}) == len(TASKS)
    assert sum(task.kind == "two-step" for task in TASKS) >= 3


@pytest.mark.parametrize("task", TASKS, ids=[task.id for task in TASKS])
def test_the_reference_solution_passes_and_the_untouched_directory_fails(
    task: SmallTask, tmp_path: Path
) -> None:
    untouched = tmp_path / "untouched"
    untouched.mkdir()
    task.lay_out(untouched)
    assert not task.check(untouched, "I do not know.")
    solved = tmp_path / "solved"
    solved.mkdir()
    task.lay_out(solved)
    done = subprocess.run(
        ["bash", "-c", task.solution], cwd=solved, capture_output=True, text=True, check=True
    )
    assert task.check(solved, done.stdout), (task.solution, done.stdout)


def test_an_answer_is_a_word_of_its_own_in_any_case() -> None:
    assert says("17")(Path(), "notes.txt has 17 lines.")
    assert not says("17")(Path(), "It has 170 lines.") and not says("17")(Path(), "1.17")
    assert says("carol")(Path(), "The user is Carol.")


def test_a_dump_of_numbers_or_of_every_candidate_is_no_answer() -> None:
    dump = "\n".join(f"<{n}>" for n in range(2, 40))
    assert not says("13")(Path(), dump)
    assert says("4")(Path(), "4 of the 8 lines contain ERROR (lines 2 and 4 too).")
    largest = says("b.log", unlike=("a.log", "c.log"))
    assert largest(Path(), "b.log is the largest.")
    assert not largest(Path(), "a.log\nb.log\nc.log")


@pytest.mark.parametrize(
    ("stop", "commands", "right", "outcome"),
    [
        ("final", 1, True, DONE),
        ("final", 0, True, RIGHT_GUESS),
        ("max_steps", 3, True, DONE),
        ("final", 0, False, NO_COMMAND),
        ("final", 2, False, WRONG),
        ("hallucination_limit", 0, False, MALFORMED),
        ("max_steps", 9, False, LOOP_LIMIT),
        ("max_wall_time", 1, False, TIME_LIMIT),
        ("error", 0, False, ERROR),
        (None, 0, False, ERROR),
    ],
)
def test_each_try_gets_one_outcome(
    stop: str | None, commands: int, right: bool, outcome: str
) -> None:
    assert classify(stop, commands, right) == outcome
