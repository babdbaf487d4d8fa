"""A reply cut at the output token limit: inside a block (which did not run), or after its
blocks (whatever followed them is lost)."""

from __future__ import annotations

from logos.agent.checks.base import RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import CUT_AFTER_BLOCKS_NOTICE, unclosed_block_notice


class Cuts:
    async def check(self, reply: Reply, run: RunState) -> str | None:
        if reply.unclosed_block:
            return unclosed_block_notice(reply.blocks)
        if reply.finish == "length" and reply.blocks:
            return CUT_AFTER_BLOCKS_NOTICE
        return None
