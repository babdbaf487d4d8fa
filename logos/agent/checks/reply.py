"""A model turn classified: what the reply held, as the checks read it."""

from __future__ import annotations

from dataclasses import dataclass

from logos.agent.turn import StreamedTurn
from logos.errors import StreamInterruptedError
from logos.protocol.debris import clean_answer
from logos.protocol.fenced_command import find_fenced_command
from logos.protocol.hallucination import find_tool_call_hallucination
from logos.protocol.parse import strip_cmd_blocks
from logos.protocol.pitfalls import pitfall_note
from logos.providers.base import FinishReason
from logos.result import Result


@dataclass(frozen=True)
class Reply:
    """What one reply held: blocks (and their results), an unclosed block, a cut, an
    interruption, fake tool calls, a fenced command, a made-up result; else it is an answer,
    maybe empty."""

    blocks: int = 0
    results: tuple[Result, ...] = ()
    unclosed_block: bool = False
    finish: FinishReason | None = None
    """"length": the reply was cut at the output token limit."""
    interrupted: StreamInterruptedError | None = None
    lost: bool = False
    """Interrupted before it wrote or ran anything: nothing of it is kept."""
    made_up_result: bool = False
    """The model wrote a `<result>` of its own (`logos.protocol.fabricated_result`)."""
    fake_call: str | None = None
    """Fake tool-call syntax in its prose (`logos.protocol.hallucination`)."""
    fenced_command: str | None = None
    """A command in a code fence, in a reply with no block before any command ran
    (`logos.protocol.fenced_command`)."""
    answer: str = ""
    """Its text without blocks (cleared of protocol debris when the policy asks)."""

    @property
    def is_answer(self) -> bool:
        """Nothing in it but prose (`answer`, which may be empty)."""
        return not (
            self.blocks
            or self.unclosed_block
            or self.interrupted
            or self.made_up_result
            or self.fake_call
            or self.fenced_command
        )

    @property
    def acted(self) -> bool:
        """A command of it succeeded (or went on as a job) into no known trap."""
        return any(
            (result.ok or result.job is not None) and pitfall_note(result) is None
            for result in self.results
        )


def read_reply(turn: StreamedTurn, *, ran_commands: bool, clean: bool) -> Reply:
    """Classify `turn`; `ran_commands`: whether the conversation had run a command before
    it; `clean`: clear the answer of protocol debris (`logos.protocol.debris`)."""
    prose = "".join(turn.prose)
    fake_call = find_tool_call_hallucination(prose)
    fenced = None
    if fake_call is None and not (turn.blocks or turn.unclosed_block or ran_commands):
        # WHY only before any command ran: a final answer may show commands in a fence; a
        # first reply that holds one and no block meant to run it.
        fenced = find_fenced_command(prose)
    answer = strip_cmd_blocks(turn.content)
    return Reply(
        blocks=turn.blocks,
        results=tuple(turn.results),
        unclosed_block=turn.unclosed_block,
        finish=turn.finish,
        interrupted=turn.interrupted,
        lost=turn.interrupted is not None and not turn.text and not turn.blocks,
        made_up_result=turn.fabricated_result,
        fake_call=fake_call,
        fenced_command=fenced,
        answer=clean_answer(answer) if clean else answer,
    )
