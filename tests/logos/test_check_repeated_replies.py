"""The repeated replies check: the very commands of the previous reply, to the very same
output, are pointed out; with the grammars, the next turn must answer."""

from __future__ import annotations

import pytest

from logos.agent.checks.repeated_replies import RepeatedReplies
from logos.agent.checks.reply import Reply
from logos.protocol.notices import repeated_reply_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio


def echo(output: str) -> Reply:
    return Reply(blocks=1, results=(ran("echo", stdout=output),))


@pytest.mark.parametrize("forced", [True, False])
async def test_the_same_commands_to_the_same_output_are_pointed_out(forced: bool) -> None:
    check, run = RepeatedReplies(forced=forced), run_state(task="how many?")
    assert await check.check(echo("4\n"), run) is None and not run.answer_due
    assert await check.check(echo("4\n"), run) == repeated_reply_notice(forced, "how many?")
    assert run.answer_due


async def test_another_output_is_not_a_repetition_and_clears_the_answer_due() -> None:
    check, run = RepeatedReplies(forced=True), run_state()
    await check.check(echo("4\n"), run)
    await check.check(echo("4\n"), run)
    assert await check.check(echo("5\n"), run) is None and not run.answer_due


async def test_an_answer_is_not_read_and_leaves_the_answer_due() -> None:
    check, run = RepeatedReplies(forced=True), run_state(answer_due=True)
    assert await check.check(Reply(answer="Four."), run) is None and run.answer_due
