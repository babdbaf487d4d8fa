"""An answer with nothing in it (or only protocol debris): asked again; a few in a row end the
run with an error that says what to change."""

from __future__ import annotations

from logos.agent.checks.base import AskAgain, EndRun, RunState
from logos.agent.checks.reply import Reply
from logos.protocol.notices import empty_reply_notice
from logos.providers.base import FinishReason

_MAX_EMPTY_REPLIES = 3


class EmptyAnswers:
    def __init__(self) -> None:
        self.row = 0

    async def check(self, reply: Reply, run: RunState) -> str | None:
        if not reply.is_answer or reply.answer.strip():
            self.row = 0
            return None
        self.row += 1
        if self.row >= _MAX_EMPTY_REPLIES:
            raise EndRun("error", _empty_replies_error(self.row, reply.finish))
        raise AskAgain(empty_reply_notice(reply.finish))


def _empty_replies_error(count: int, finish: FinishReason | None) -> str:
    if finish == "length":
        return (
            f"the model's last {count} replies were cut off at the output token limit before "
            "any text (reasoning can use them all up): raise max_tokens"
        )
    return (
        f"the model sent {count} empty replies in a row: check that the model and its chat "
        "template can follow the system prompt, or try another model"
    )
