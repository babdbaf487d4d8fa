"""The worked-out check: an answer to a question that asks for a number, before any command
printed a number alone, sends the model back once to work it out with a command."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.reply import Reply
from logos.agent.checks.worked_out import WorkedOut
from logos.protocol.notices import unworked_number_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
TASK = "How many lines of app.log contain ERROR?"
LISTED = ran("grep ERROR app.log", stdout="10:02 ERROR disk\n10:04 ERROR reset\n")
GUESS = Reply(answer="2")


async def test_a_number_read_off_a_listing_sends_the_model_back_once_to_count() -> None:
    check = WorkedOut()
    run = run_state(task=TASK, results=[LISTED], ran_commands=True, acted=True, answer_due=True)
    with pytest.raises(AskAgain) as asked:
        await check.check(GUESS, run)
    assert asked.value.notice == unworked_number_notice("grep ERROR app.log | wc -l")
    assert not run.acted and not run.answer_due
    assert await check.check(GUESS, run) is None  # the answer given after that stands


async def test_without_a_listing_to_count_it_is_told_to_work_the_number_out() -> None:
    counts = ran("wc -l a.txt b.txt", stdout=" 9 a.txt\n14 b.txt\n23 total\n")
    run = run_state(task="How many lines do a.txt and b.txt have?", results=[counts])
    run.ran_commands = True
    with pytest.raises(AskAgain) as asked:
        await WorkedOut().check(Reply(answer="23"), run)
    assert asked.value.notice == unworked_number_notice(None)


@pytest.mark.parametrize(
    "changes",
    [
        {"results": [LISTED, ran("grep -c ERROR app.log", stdout="2\n")]},
        {"task": "Which lines of app.log contain ERROR?"},
        {"last_turn": True},
        {"ran_commands": False},
    ],
    ids=["a number printed alone", "no number asked", "last turn", "no command ran"],
)
async def test_a_number_worked_out_or_none_asked_or_no_turn_left_lets_the_answer_stand(
    changes: dict[str, object],
) -> None:
    run = run_state(**{"task": TASK, "results": [LISTED], "ran_commands": True, **changes})
    assert await WorkedOut().check(GUESS, run) is None


async def test_a_reply_that_runs_commands_is_let_be() -> None:
    run = run_state(task=TASK, results=[LISTED], ran_commands=True)
    assert await WorkedOut().check(Reply(blocks=1, results=(LISTED,)), run) is None
