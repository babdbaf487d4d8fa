"""One model turn as it streams: its text, its blocks started the moment they close, what
it spent, and how it ended.

The loop (`logos.agent.loop`) builds the request and the executor; this module reads the
stream into a `StreamedTurn`. A `<result>` the model starts writing after a block of its
own is where the reading stops (the real results follow); one written in a reply without a
block is found once the whole reply is in (`logos.protocol.fabricated_result`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from logos.agent.execute import BlockExecutor
from logos.agent.steps import StepMessage
from logos.callback import invoke_callback
from logos.errors import ProviderError, StreamInterruptedError
from logos.protocol.fabricated_result import RESULT_TAG, find_fabricated_result
from logos.protocol.parse import CmdStreamParser, CommandBlock, ProseDelta, UnclosedBlock
from logos.providers.base import (
    Finish,
    FinishReason,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.result import Result

OnText = Callable[[str], Awaitable[None] | None] | None


@dataclass
class StreamedTurn:
    """What one model turn produced, filled in while it streams."""

    text: list[str] = field(default_factory=list)
    prose: list[str] = field(default_factory=list)
    prose_tail: str = ""
    """The last characters of the prose, to spot a `<result>` split across deltas."""
    fabricated_at: int | None = None
    """Where the model started writing a `<result>` of its own, in the text."""
    reasoning: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish: FinishReason | None = None
    blocks: int = 0
    unclosed_block: bool = False
    interrupted: StreamInterruptedError | None = None
    results: list[Result] = field(default_factory=list)
    executor: BlockExecutor | None = None
    shown: bool = True
    """Whether its prose goes to `Callbacks.on_delta` as it streams."""

    @property
    def fabricated_result(self) -> bool:
        return self.fabricated_at is not None

    @property
    def content(self) -> str:
        """What the model wrote, up to a result it made up (that part is discarded)."""
        text = "".join(self.text)
        return text if self.fabricated_at is None else text[: self.fabricated_at].rstrip()

    def step(self) -> StepMessage:
        return StepMessage(
            role="assistant",
            content=self.content,
            reasoning="".join(self.reasoning) or None,
            reasoning_signature="".join(self.signature) or None,
            redacted_reasoning=tuple(self.redacted),
            usage=self.usage,
        )


class TurnReader:
    """Reads one stream into its turn, submitting each block to the executor as it closes;
    the prose and the reasoning go to their callbacks (`Callbacks.on_delta`, `on_reasoning_delta`)
    as they come."""

    def __init__(
        self,
        turn: StreamedTurn,
        executor: BlockExecutor,
        account: Callable[[Usage], None],
        *,
        on_delta: OnText = None,
        on_reasoning_delta: OnText = None,
    ) -> None:
        self.turn = turn
        self.executor = executor
        self.account = account
        self.on_delta = on_delta
        self.on_reasoning_delta = on_reasoning_delta
        self.parser = CmdStreamParser()

    async def read(self, stream: AsyncGenerator[StreamEvent, None]) -> ProviderError | None:
        """Read `stream` to its end; the provider's failure, if one ended it (the executor's
        commands are then cancelled: their results would reach no one). A dropped connection
        is kept on the turn (`StreamedTurn.interrupted`)."""
        turn = self.turn
        try:
            async for event in stream:
                await self._take(event)
                if turn.fabricated_result:
                    break
        except StreamInterruptedError as exc:
            turn.interrupted = exc
        except ProviderError as exc:
            self.executor.cancel()
            return exc
        finally:
            # Closes the provider's HTTP response too, also when we stop reading early.
            with anyio.CancelScope(shield=True):
                await stream.aclose()
        if not turn.fabricated_result:
            cut = turn.finish == "length" or turn.interrupted is not None
            for parsed in self.parser.close(truncated=cut):
                await self._on_parsed(parsed)
        if not (turn.blocks or turn.unclosed_block):
            # WHY after the stream: with no block, nothing ran that a made-up result could
            # hide, and the whole reply tells a result from a mention of the tag.
            turn.fabricated_at = find_fabricated_result("".join(turn.text))
        return None

    async def _take(self, event: StreamEvent) -> None:
        turn = self.turn
        if isinstance(event, TextDelta):
            turn.text.append(event.text)
            for parsed in self.parser.feed(event.text):
                await self._on_parsed(parsed)
        elif isinstance(event, ReasoningDelta):
            turn.reasoning.append(event.text)
            await invoke_callback(self.on_reasoning_delta, event.text)
        elif isinstance(event, ReasoningSignature):
            turn.signature.append(event.signature)
        elif isinstance(event, RedactedReasoning):
            turn.redacted.append(event.data)
        elif isinstance(event, UsageReport):
            turn.usage = event.usage
            # WHY now, not after the commands: a wall clock or a cancel that stops them
            # must not lose what the model has already spent.
            self.account(event.usage)
        elif isinstance(event, Finish):
            turn.finish = event.reason

    async def _on_parsed(self, parsed: object) -> None:
        turn = self.turn
        if turn.fabricated_result:
            return  # what follows a made-up result (in the same delta) is not the model's act
        if isinstance(parsed, CommandBlock):
            self.executor.submit(parsed.command)
            turn.blocks += 1
        elif isinstance(parsed, ProseDelta):
            await self._on_prose(parsed.text)
        elif isinstance(parsed, UnclosedBlock):
            turn.unclosed_block = True

    async def _on_prose(self, text: str) -> None:
        turn = self.turn
        if turn.blocks:
            seen = turn.prose_tail + text
            at = seen.find(RESULT_TAG)
            if at >= 0:
                # The model is writing its own results: stop reading and run the real ones.
                turn.fabricated_at = "".join(turn.text).rfind(RESULT_TAG)
                text = text[: max(0, at - (len(seen) - len(text)))]
        if text:
            turn.prose.append(text)
            turn.prose_tail = (turn.prose_tail + text)[-len(RESULT_TAG) :]
            if turn.shown:
                await invoke_callback(self.on_delta, text)
