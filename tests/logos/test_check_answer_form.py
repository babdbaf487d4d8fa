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
