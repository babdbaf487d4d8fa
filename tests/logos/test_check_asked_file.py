"""The asked-file check: an answer to which file (holds a word, is the largest, …) before any
command picked it out sends the model back once with the command; once one did, the answer
is asked beside the names it printed."""

from __future__ import annotations

import pytest

from logos.agent.checks.asked_file import AskedFiles
from logos.agent.checks.base import AskAgain
from logos.agent.checks.reply import Reply
from logos.protocol.notices import picked_file_note, unpicked_file_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
TASK = "Which file in the notes directory contains the word TODO?"
LISTED = ran("ls -l notes", stdout="ideas.md\nmeeting.md\nplan.md\n")
GUESS = Reply(answer="ideas.md")


@pytest.mark.parametrize(
    ("task", "asked", "command"),
    [
        (TASK, "holds TODO", "grep -rl TODO notes"),
        ("Which file in the notes directory is the largest?", "is the largest", "ls -S notes"),
    ],
)
async def test_a_name_read_off_a_listing_sends_the_model_back_once_to_pick_it(
    task: str, asked: str, command: str
) -> None:
    check = AskedFiles()
    run = run_state(task=task, results=[LISTED], ran_commands=True, acted=True, answer_due=True)
    with pytest.raises(AskAgain) as told:
        await check.check(GUESS, run)
    picking = command if command.startswith("grep") else f"{command} | head -n 1"
    assert told.value.notice == unpicked_file_notice(asked, picking)
    assert f"<cmd>{picking}</cmd>" in (told.value.notice or "")
    assert not run.acted and not run.answer_due
    assert await check.check(GUESS, run) is None  # the answer given after that stands


@pytest.mark.parametrize(
    "changes",
    [
        {"task": "Which lines of notes/plan.md say TODO?"},
        {"last_turn": True},
    ],
    ids=["no file asked", "last turn"],
)
async def test_no_file_asked_or_no_turn_left_lets_the_answer_stand(
    changes: dict[str, object],
) -> None:
    run = run_state(**{"task": TASK, "results": [LISTED], "ran_commands": True, **changes})
    assert await AskedFiles().check(GUESS, run) is None
    assert run.answer_notes == []


async def test_a_reply_that_runs_commands_is_let_be() -> None:
    run = run_state(task=TASK, results=[LISTED], ran_commands=True)
    assert await AskedFiles().check(Reply(blocks=1, results=(LISTED,)), run) is None


async def test_once_picked_the_answer_is_asked_beside_the_names_printed() -> None:
    """Asked again from every output, the default model named the file the search printed
    and another one a listing had shown."""
    check = AskedFiles()
    search = ran("grep -rl TODO notes", stdout="notes/plan.md\n")
    run = run_state(task=TASK, results=[LISTED, search], ran_commands=True)
    assert await check.check(Reply(answer="notes/plan.md"), run) is None
    assert await check.check(Reply(answer="notes/plan.md"), run) is None
    assert run.answer_notes == [picked_file_note("holds TODO", ["notes/plan.md"])]
    assert run.answer_notes == ["The file that holds TODO, as a command printed it: notes/plan.md"]


async def test_lines_that_show_more_than_names_are_left_to_the_outputs() -> None:
    """Told the lines of a definition's search again, the default model answered with a
    sentence that named no file."""
    search = ran("grep -rn parse_date src", stdout="src/dates.py:4:def parse_date(text):\n")
    task = "Which file under src defines the function parse_date?"
    run = run_state(task=task, results=[search], ran_commands=True)
    assert await AskedFiles().check(Reply(answer="src/dates.py"), run) is None
    assert run.answer_notes == []


def test_the_names_are_said_whole_up_to_ten() -> None:
    assert picked_file_note("holds x", []) == (
        "No file holds x: the command that looked for it printed none."
    )
    many = [f"f{n}.txt" for n in range(12)]
    assert picked_file_note("holds x", many) == (
        "The files that hold x, as a command printed them: " + ", ".join(many[:10]) + ", and 2 more"
    )
