"""The searched-word check: an answer to which file holds a word, before any command searched
for it, sends the model back once with the search."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.reply import Reply
from logos.agent.checks.searched_word import SearchedWord
from logos.protocol.notices import searched_note, unsearched_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
TASK = "Which file in the notes directory contains the word TODO?"
LISTED = ran("ls -l notes", stdout="ideas.md\nmeeting.md\nplan.md\n")
GUESS = Reply(answer="ideas.md")


async def test_a_name_read_off_a_listing_sends_the_model_back_once_to_search() -> None:
    check = SearchedWord()
    run = run_state(task=TASK, results=[LISTED], ran_commands=True, acted=True, answer_due=True)
    with pytest.raises(AskAgain) as asked:
        await check.check(GUESS, run)
    assert asked.value.notice == unsearched_notice("TODO", "grep -rl TODO notes")
    assert "<cmd>grep -rl TODO notes</cmd>" in (asked.value.notice or "")
    assert not run.acted and not run.answer_due
    assert await check.check(GUESS, run) is None  # the answer given after that stands


@pytest.mark.parametrize(
    "changes",
    [
        {"results": [LISTED, ran("grep -rl TODO notes", stdout="notes/plan.md\n")]},
        {"task": "Which file in the notes directory is the largest?"},
        {"last_turn": True},
    ],
    ids=["searched", "no word sought", "last turn"],
)
async def test_a_search_done_or_none_asked_or_no_turn_left_lets_the_answer_stand(
    changes: dict[str, object],
) -> None:
    run = run_state(**{"task": TASK, "results": [LISTED], "ran_commands": True, **changes})
    assert await SearchedWord().check(GUESS, run) is None


async def test_a_reply_that_runs_commands_is_let_be() -> None:
    run = run_state(task=TASK, results=[LISTED], ran_commands=True)
    assert await SearchedWord().check(Reply(blocks=1, results=(LISTED,)), run) is None


async def test_once_searched_the_answer_is_asked_beside_what_the_search_printed() -> None:
    """Asked again from every output, the default model named the file the search printed
    and another one a listing had shown."""
    check = SearchedWord()
    search = ran("grep -rl TODO notes", stdout="notes/plan.md\n")
    run = run_state(task=TASK, results=[LISTED, search], ran_commands=True)
    assert await check.check(Reply(answer="notes/plan.md"), run) is None
    assert await check.check(Reply(answer="notes/plan.md"), run) is None
    assert run.answer_notes == [searched_note("TODO", "notes/plan.md\n")]
    assert run.answer_notes == ["The search for TODO printed only this: notes/plan.md"]


def test_what_a_search_printed_is_said_whole_up_to_ten_lines() -> None:
    assert searched_note("x", "") == "The search for x found it in no file."
    many = "".join(f"f{n}.txt\n" for n in range(12))
    assert searched_note("x", many).endswith("f8.txt; f9.txt; and 2 more lines")
