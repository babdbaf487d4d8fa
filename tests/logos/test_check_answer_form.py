"""The answer form check: an answer that lacks the form its task asks for is reduced to the
bare value it states when the outputs show it, else asked once more, held to the form."""

from __future__ import annotations

import pytest

from logos.agent.checks.answer_form import AnswerForms
from logos.agent.checks.base import AskAgain, EndRun
from logos.agent.checks.reply import Reply
from logos.protocol.notices import answer_form_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
TASK = "How many lines are in notes.txt? Answer with just the number."
WC = ran("wc -l notes.txt", stdout="7 notes.txt\n")


async def test_an_answer_in_the_form_stands() -> None:
    run = run_state(task=TASK, results=[WC])
    assert await AnswerForms().check(Reply(answer="7"), run) is None


async def test_a_value_stated_once_and_shown_by_the_outputs_ends_the_run_as_the_answer() -> None:
    run = run_state(task=TASK, results=[WC])
    with pytest.raises(EndRun) as ended:
        await AnswerForms().check(Reply(answer="notes.txt has 7 lines."), run)
    assert (ended.value.reason, ended.value.answer) == ("final", "7")


async def test_otherwise_it_is_asked_once_more_held_to_the_form() -> None:
    check, run = AnswerForms(), run_state(task=TASK, results=[WC], turn="answer")
    explained = Reply(answer="To count lines, run:\n```\n$ wc -l notes.txt\n```")
    with pytest.raises(AskAgain) as asked:
        await check.check(explained, run)
    assert asked.value.notice == answer_form_notice(TASK)
    assert run.answer_due and run.held_to_form
    assert await check.check(explained, run) is None  # the answer given again stands


@pytest.mark.parametrize(
    "changes",
    [{"task": "How many lines are in notes.txt?"}, {"last_turn": True}],
    ids=["no form asked", "last turn"],
)
async def test_no_form_asked_or_no_turn_left_lets_the_answer_stand(
    changes: dict[str, object],
) -> None:
    run = run_state(**{"task": TASK, "results": [WC], **changes})
    assert await AnswerForms().check(Reply(answer="It has lines."), run) is None


async def test_a_number_asked_again_that_no_output_shows_is_the_one_printed_alone() -> None:
    """Asked again under the number grammar, the default model glued the digits of the
    numbers it read into one; the one number a command printed alone is the value."""
    listed = ran("cat prices.txt", stdout="15\n42\n8\n")
    added = ran("awk '{s += $1} END {print s}' prices.txt", stdout="65\n")
    run = run_state(task=TASK, results=[listed, added], held_to_form=True)
    with pytest.raises(EndRun) as ended:
        await AnswerForms().check(Reply(answer="1542865"), run)
    assert (ended.value.reason, ended.value.answer) == ("final", "65")
    for shown in ("65", "42"):  # a number an output shows stands, even one not alone
        assert await AnswerForms().check(Reply(answer=shown), run) is None


async def test_a_glued_number_stands_unless_exactly_one_number_was_printed_alone() -> None:
    other = ran("wc -l other.txt", stdout="9 other.txt\n")
    for results in ([WC, other], [ran("cat notes.txt", stdout="a 1\nb 2\n")]):
        run = run_state(task=TASK, results=results, held_to_form=True)
        assert await AnswerForms().check(Reply(answer="791"), run) is None
    first_time = run_state(task=TASK, results=[WC])
    assert await AnswerForms().check(Reply(answer="791"), first_time) is None
