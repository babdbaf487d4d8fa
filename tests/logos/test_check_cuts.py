"""The cuts check: a reply cut inside a block, or after its blocks, is told so."""

from __future__ import annotations

import pytest

from logos.agent.checks.cuts import Cuts
from logos.agent.checks.reply import Reply
from logos.protocol.notices import CUT_AFTER_BLOCKS_NOTICE, unclosed_block_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio


async def test_a_cut_inside_a_block_says_which_blocks_ran() -> None:
    reply = Reply(blocks=2, results=(ran(), ran()), unclosed_block=True, finish="length")
    notice = await Cuts().check(reply, run_state())
    assert notice == unclosed_block_notice(2) and "NOT run" in notice


async def test_a_cut_after_the_blocks_says_the_rest_is_lost() -> None:
    reply = Reply(blocks=1, results=(ran(),), finish="length")
    assert await Cuts().check(reply, run_state()) == CUT_AFTER_BLOCKS_NOTICE


@pytest.mark.parametrize(
    "reply",
    [Reply(blocks=1, results=(ran(),), finish="stop"), Reply(finish="length", answer="")],
    ids=["whole reply", "cut before any block (an empty answer's check)"],
)
async def test_anything_else_is_not_a_cut(reply: Reply) -> None:
    assert await Cuts().check(reply, run_state()) is None
