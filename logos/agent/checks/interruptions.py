"""A reply the connection broke off: asked again, or continued from; a connection that keeps
breaking ends the run.

WHY in a row: a long run over a flaky network may see a few drops; only a connection that
keeps failing ends it.
"""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, EndRun, RunState
from logos.agent.checks.reply import Reply
from logos.errors import StreamInterruptedError
from logos.protocol.notices import INTERRUPTED_NOTICE

MAX_STREAM_INTERRUPTIONS = 3


class Interruptions:
    def __init__(self) -> None:
        self.row = 0

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if reply.interrupted is None:
            self.row = 0
            return None
        self.row += 1
        if self.row >= MAX_STREAM_INTERRUPTIONS:
            raise EndRun("error", _interrupted_error(reply.interrupted, self.row))
        if reply.lost:
            raise AskAgain()  # nothing was shown or run: ask again
        return INTERRUPTED_NOTICE


def _interrupted_error(last: StreamInterruptedError, times: int) -> str:
    return (
        f"the model's answer broke off {times} times in a row; the last time: "
        f"{last.message.rstrip('.')}. Check the network or the server, then resume the run "
        "from its steps."
    )
