"""The check-back: an answer from a conversation that ran no command is asked once whether
the task needs one; the answer given again stands."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.check_back import CheckBack
from logos.agent.checks.reply import Reply
from logos.protocol.notices import CHECK_BACK_NOTICE
from tests.support.checks import run_state

pytestmark = pytest.mark.anyio
PARIS = Reply(answer="Paris.")


async def test_an_answer_before_any_command_is_checked_back_once() -> None:
    check, run = CheckBack(), run_state()
    with pytest.raises(AskAgain) as asked:
        await check.check(PARIS, run)
    assert asked.value.notice == CHECK_BACK_NOTICE
    assert await check.check(PARIS, run) is None


@pytest.mark.parametrize(
    "changes", [{"ran_commands": True}, {"last_turn": True}], ids=["commands ran", "last turn"]
)
async def test_not_once_a_command_ran_nor_on_the_last_turn(changes: dict[str, bool]) -> None:
    assert await CheckBack().check(PARIS, run_state(**changes)) is None
