"""The interruptions check: a broken-off reply is continued from (or, when nothing of it came,
asked again), and a connection that breaks three times in a row ends the run."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain, EndRun
from logos.agent.checks.interruptions import MAX_STREAM_INTERRUPTIONS, Interruptions
from logos.agent.checks.reply import Reply
from logos.errors import StreamInterruptedError
from logos.protocol.notices import INTERRUPTED_NOTICE
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
DROP = StreamInterruptedError("connection reset by peer mid-stream", retryable=True)


async def test_a_reply_broken_off_after_a_block_is_continued_from() -> None:
    reply = Reply(blocks=1, results=(ran(),), interrupted=DROP, answer="")
    assert await Interruptions().check(reply, run_state()) == INTERRUPTED_NOTICE


async def test_a_reply_lost_before_anything_came_is_asked_again_without_a_notice() -> None:
    with pytest.raises(AskAgain) as asked:
        await Interruptions().check(Reply(interrupted=DROP, lost=True), run_state())
    assert asked.value.notice is None


async def test_three_in_a_row_end_the_run_naming_the_last_error() -> None:
    check, run = Interruptions(), run_state()
    for _ in range(MAX_STREAM_INTERRUPTIONS - 1):
        await check.check(Reply(interrupted=DROP, answer="half"), run)
    with pytest.raises(EndRun) as ended:
        await check.check(Reply(interrupted=DROP, lost=True), run)
    assert ended.value.reason == "error" and ended.value.error is not None
    assert "3 times in a row" in ended.value.error and "connection reset" in ended.value.error


async def test_a_whole_reply_between_them_starts_the_count_again() -> None:
    check, run = Interruptions(), run_state()
    for _ in range(3):
        assert await check.check(Reply(interrupted=DROP, answer="half"), run) == INTERRUPTED_NOTICE
        assert await check.check(Reply(answer="whole"), run) is None
