"""A reply that pretends to act: a made-up `<result>`, fake tool-call syntax, or (before any
command ran) a command in a code fence, instead of a block.

Without a block, such a reply is answered at once, and doing it `max_hallucinations` times in a
row ends the run (`hallucination_limit`): taken as the final answer, it would end the run on a
lie. Beside real blocks, a made-up result or a fake call is pointed out under the results.
"""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, EndRun, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.fabricated_result import RESULT_TAG
from logos.protocol.notices import FABRICATED_RESULT_NOTICE, not_run_notice


class FakeActions:
    def __init__(self, max_in_a_row: int) -> None:
        self.max_in_a_row = max_in_a_row
        self.row = 0

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if reply.blocks == 0 and (reply.made_up_result or reply.fake_call or reply.fenced_command):
            self.row += 1
            what, notice = self._instead_of_a_block(reply)
            if self.row >= self.max_in_a_row:
                raise EndRun(
                    "hallucination_limit",
                    f"the model wrote {what} {self.row} times in a row instead of <cmd> blocks",
                )
            raise AskAgain(notice)
        self.row = 0
        notices = []
        if reply.made_up_result:
            notices.append(FABRICATED_RESULT_NOTICE)
        if reply.fake_call is not None:
            notices.append(not_run_notice(repr(reply.fake_call), 1))
        return "\n\n".join(notices) or None

    def _instead_of_a_block(self, reply: Reply) -> tuple[str, str]:
        """What the reply wrote instead of a block, and the notice for it."""
        if reply.made_up_result:
            return f"made-up results ({RESULT_TAG})", FABRICATED_RESULT_NOTICE
        if reply.fake_call is not None:
            return (
                f"fake tool calls ({reply.fake_call!r})",
                not_run_notice(repr(reply.fake_call), self.row),
            )
        fenced = reply.fenced_command
        return (
            f"commands in code fences ({fenced!r})",
            not_run_notice(f"a command in a code fence ({fenced!r})", self.row),
        )
