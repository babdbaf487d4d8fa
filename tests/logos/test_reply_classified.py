"""A model turn classified into what the reply held, and the checks run over it in order."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain, EndRun, RunState, Verdict, run_checks
from logos.agent.checks.reply import Reply, read_reply
from logos.agent.turn import StreamedTurn
from logos.errors import StreamInterruptedError
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio


def turn(text: str, **fields: object) -> StreamedTurn:
    """A turn whose whole text is also its prose (no block in it)."""
    return StreamedTurn(text=[text], prose=[text], **fields)  # type: ignore[arg-type]


def test_a_reply_with_blocks_is_not_an_answer_and_acted_when_one_succeeded() -> None:
    blocks = StreamedTurn(
        text=["<cmd>false</cmd><cmd>true</cmd>"],
        blocks=2,
        results=[ran("false", exit_code=1), ran("true")],
    )
    reply = read_reply(blocks, ran_commands=False, clean=False)
    assert (reply.blocks, reply.is_answer, reply.acted, reply.answer) == (2, False, True, "")
    failed = StreamedTurn(text=["<cmd>false</cmd>"], blocks=1, results=[ran("false", exit_code=1)])
    assert not read_reply(failed, ran_commands=False, clean=False).acted


def test_a_command_that_fell_into_a_trap_is_not_acting() -> None:
    summed = StreamedTurn(text=["<cmd>sum n.txt</cmd>"], blocks=1, results=[ran("sum n.txt")])
    assert not read_reply(summed, ran_commands=False, clean=False).acted


def test_a_fenced_command_counts_only_before_any_command_ran() -> None:
    fenced = "```bash\nwc -l notes.txt\n```"
    first = read_reply(turn(fenced), ran_commands=False, clean=False)
    assert first.fenced_command == "wc -l notes.txt" and not first.is_answer
    later = read_reply(turn(fenced), ran_commands=True, clean=False)
    assert later.fenced_command is None and later.is_answer and later.answer == fenced


def test_fake_calls_and_made_up_results_are_named() -> None:
    fake = read_reply(turn('<tool_call>{"name": "bash"}'), ran_commands=False, clean=False)
    assert fake.fake_call == "<tool_call>" and not fake.is_answer
    made_up = turn("<result>ok</result>", fabricated_at=0)
    assert read_reply(made_up, ran_commands=False, clean=False).made_up_result


def test_a_reply_lost_to_the_connection_is_told_from_one_broken_off() -> None:
    drop = StreamInterruptedError("reset", retryable=True)
    lost = read_reply(StreamedTurn(interrupted=drop), ran_commands=False, clean=False)
    assert lost.lost and not lost.is_answer
    half = read_reply(turn("Half an", interrupted=drop), ran_commands=False, clean=False)
    assert not half.lost and not half.is_answer


def test_an_answer_is_cleared_of_debris_only_when_asked() -> None:
    debris = turn("It ran.<-><-><-><-><->")
    assert read_reply(debris, ran_commands=True, clean=True).answer == "It ran."
    assert read_reply(debris, ran_commands=True, clean=False).answer.endswith("<->")


class Says:
    def __init__(self, notice: str | None, asks: bool = False, ends: bool = False) -> None:
        self.notice, self.asks, self.ends = notice, asks, ends
        self.read = 0

    async def check(self, reply: Reply, run: RunState) -> str | None:
        self.read += 1
        if self.ends:
            raise EndRun("max_steps")
        if self.asks:
            raise AskAgain(self.notice)
        return self.notice


async def test_checks_run_in_order_until_one_asks_again() -> None:
    after = Says("never")
    checks = [Says("first"), Says(None), Says("asked", asks=True), after]
    verdict = await run_checks(checks, Reply(answer="Done."), run_state())
    assert verdict == Verdict(("first", "asked")) and after.read == 0


async def test_an_answer_no_check_objects_to_stands_and_a_reply_with_blocks_is_answered() -> None:
    assert await run_checks([Says(None)], Reply(answer="Done."), run_state()) == Verdict(
        answer="Done."
    )
    blocks = Reply(blocks=1, results=(ran(),))
    assert await run_checks([Says(None)], blocks, run_state()) == Verdict()


async def test_a_check_that_ends_the_run_goes_through() -> None:
    with pytest.raises(EndRun):
        await run_checks([Says(None, ends=True)], Reply(answer="Done."), run_state())
