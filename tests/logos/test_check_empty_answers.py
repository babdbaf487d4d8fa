"""The empty answers check: an answer with nothing in it is asked again, and three in a row
end the run with an error that says what to change."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain, EndRun
from logos.agent.checks.empty_answers import EmptyAnswers
from logos.agent.checks.reply import Reply
from logos.protocol.notices import empty_reply_notice
from tests.support.checks import run_state

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("finish", ["stop", "length"])
async def test_an_empty_answer_is_asked_again(finish: str) -> None:
    reply = Reply(answer="  \n", finish=finish)  # type: ignore[arg-type]
    with pytest.raises(AskAgain) as asked:
        await EmptyAnswers().check(reply, run_state())
    assert asked.value.notice == empty_reply_notice(reply.finish)


@pytest.mark.parametrize(
    ("finish", "advice"),
    [("stop", "check that the model and its chat template"), ("length", "raise max_tokens")],
)
async def test_three_in_a_row_end_the_run_with_advice(finish: str, advice: str) -> None:
    check, run = EmptyAnswers(), run_state()
    empty = Reply(finish=finish)  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(AskAgain):
            await check.check(empty, run)
    with pytest.raises(EndRun) as ended:
        await check.check(empty, run)
    assert ended.value.reason == "error" and advice in (ended.value.error or "")


async def test_an_answer_in_between_starts_the_count_again() -> None:
    check, run = EmptyAnswers(), run_state()
    for _ in range(3):
        with pytest.raises(AskAgain):
            await check.check(Reply(), run)
        assert await check.check(Reply(answer="Done."), run) is None
