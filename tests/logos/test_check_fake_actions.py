"""The fake actions check: a made-up result, a fake tool call or a fenced command instead of a
block is answered at once, more sternly the second time, and ends the run the third; beside
real blocks they are pointed out with the results."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain, EndRun
from logos.agent.checks.fake_actions import FakeActions
from logos.agent.checks.reply import Reply
from logos.protocol.notices import FABRICATED_RESULT_NOTICE, not_run_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
FAKE_CALL = Reply(fake_call="<tool_call>", answer='<tool_call>{"name": "bash"}')


@pytest.mark.parametrize(
    ("reply", "notice"),
    [
        (Reply(made_up_result=True), FABRICATED_RESULT_NOTICE),
        (FAKE_CALL, not_run_notice("'<tool_call>'", 1)),
        (
            Reply(fenced_command="wc -l notes.txt"),
            not_run_notice("a command in a code fence ('wc -l notes.txt')", 1),
        ),
    ],
    ids=["made-up result", "fake tool call", "fenced command"],
)
async def test_instead_of_a_block_it_is_answered_at_once(reply: Reply, notice: str) -> None:
    with pytest.raises(AskAgain) as asked:
        await FakeActions(3).check(reply, run_state())
    assert asked.value.notice == notice


async def test_the_second_time_is_sterner_and_the_third_ends_the_run() -> None:
    check, run = FakeActions(3), run_state()
    with pytest.raises(AskAgain):
        await check.check(FAKE_CALL, run)
    with pytest.raises(AskAgain) as again:
        await check.check(FAKE_CALL, run)
    assert again.value.notice == not_run_notice("'<tool_call>'", 2)
    with pytest.raises(EndRun) as ended:
        await check.check(Reply(made_up_result=True), run)
    assert ended.value.reason == "hallucination_limit"
    assert ended.value.error == (
        "the model wrote made-up results (<result>) 3 times in a row instead of <cmd> blocks"
    )


async def test_a_reply_with_a_block_starts_the_count_again() -> None:
    check, run = FakeActions(2), run_state()
    with pytest.raises(AskAgain):
        await check.check(FAKE_CALL, run)
    assert await check.check(Reply(blocks=1, results=(ran(),)), run) is None
    with pytest.raises(AskAgain):
        await check.check(FAKE_CALL, run)


async def test_beside_real_blocks_both_slips_are_pointed_out_with_the_results() -> None:
    reply = Reply(blocks=1, results=(ran(),), made_up_result=True, fake_call="[TOOL_CALLS]")
    notice = await FakeActions(3).check(reply, run_state())
    assert notice == FABRICATED_RESULT_NOTICE + "\n\n" + not_run_notice("'[TOOL_CALLS]'", 1)


async def test_an_answer_passes() -> None:
    assert await FakeActions(3).check(Reply(answer="Done."), run_state()) is None
