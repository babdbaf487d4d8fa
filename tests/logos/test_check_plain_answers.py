"""The plain answers check: once commands ran, the model's own answer is asked again from
the outputs, in an answer turn; that answer stands."""

from __future__ import annotations

import pytest

from logos.agent.checks import plain_answers
from logos.agent.checks.base import AskAgain
from logos.agent.checks.plain_answers import PlainAnswers
from logos.agent.checks.reply import Reply
from logos.protocol.notices import answer_notice
from tests.support.checks import run_state

pytestmark = pytest.mark.anyio
DRAFT = Reply(answer="Python: the directory holds setup.py.")


async def test_an_answer_after_commands_is_asked_again_from_the_outputs() -> None:
    run = run_state(task="what is it?", ran_commands=True, turn="reply")
    with pytest.raises(AskAgain) as asked:
        await PlainAnswers().check(DRAFT, run)
    assert asked.value.notice == answer_notice("what is it?") and run.answer_due


@pytest.mark.parametrize(
    "changes",
    [
        {"ran_commands": False},
        {"ran_commands": True, "turn": "answer"},
        {"ran_commands": True, "last_turn": True},
    ],
    ids=["no command ran", "the answer turn itself", "last turn"],
)
async def test_the_answer_stands(changes: dict[str, object]) -> None:
    run = run_state(**changes)
    assert await PlainAnswers().check(DRAFT, run) is None and not run.answer_due


def test_only_the_answer_asked_from_the_outputs_streams_once_commands_ran() -> None:
    assert plain_answers.shown(run_state(), "act")
    assert not plain_answers.shown(run_state(ran_commands=True), "reply")
    assert plain_answers.shown(run_state(ran_commands=True), "answer")
    assert plain_answers.shown(run_state(ran_commands=True, last_turn=True), "reply")
