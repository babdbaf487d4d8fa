"""The agent loop: prompt → model → `<cmd>` blocks → concurrent execution → `<result>` → model.

Stateless: the caller passes the history in and gets the new steps back. Blocks start the
moment they close in the stream, so command time hides behind the model's generation.
Everything the model can get wrong (fake tool calls, commands in code fences, empty
replies, a reply cut inside a block, made-up results, the same failing command again and
again, an answer before any command ran) is answered with a corrective message
(`logos.protocol.notices`) rather than a crash, and every way a run can end keeps the steps and the
usage spent so far.

Commands still running at `ExecOptions.background_after_s` go on as jobs (on a runner that
keeps them): the next envelope after a job ends carries its end, the model waits for or
stops one with commands the loop answers itself (`logos.commands.jobs`), an answer given
while jobs still run is answered once with the list of them, and the run stops what is
left when it ends (`RunResult.jobs`). The runner prepares (e.g. starts its sandbox) while
the first model request is under way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from logos.agent.config import Callbacks, Config
from logos.agent.context import HEADROOM, estimate_tokens, fit_to_window
from logos.agent.execute import BlockExecutor
from logos.agent.steps import (
    HistoryItem,
    RunResult,
    StepMessage,
    StopReason,
    has_run_commands,
    normalize_history,
    steps_to_messages,
)
from logos.callback import invoke_callback
from logos.commands.jobs import JobCommands
from logos.commands.run_jobs import RunJobs
from logos.errors import (
    ContextWindowExceededError,
    LogosError,
    ProviderError,
    StreamInterruptedError,
)
from logos.protocol.debris import clean_answer
from logos.protocol.envelope import format_results
from logos.protocol.fabricated_result import RESULT_TAG, find_fabricated_result
from logos.protocol.fenced_command import find_fenced_command
from logos.protocol.grammar import Turn
from logos.protocol.hallucination import find_tool_call_hallucination
from logos.protocol.notices import (
    CHECK_BACK_NOTICE,
    CUT_AFTER_BLOCKS_NOTICE,
    FABRICATED_RESULT_NOTICE,
    INTERRUPTED_NOTICE,
    answer_notice,
    empty_reply_notice,
    not_run_notice,
    repeated_reply_notice,
    running_jobs_notice,
    unclosed_block_notice,
)
from logos.protocol.parse import (
    CmdStreamParser,
    CommandBlock,
    ProseDelta,
    UnclosedBlock,
    strip_cmd_blocks,
)
from logos.protocol.pitfalls import pitfall_note, pitfall_notes
from logos.protocol.plain_answer import ANSWER_SYSTEM, plain_answer_view
from logos.protocol.prompt import build_system_prompt
from logos.protocol.repeated_failure import RepeatedFailures
from logos.protocol.repetition import Repetition
from logos.protocol.worked_examples import WorkedExamples
from logos.providers.base import (
    Finish,
    FinishReason,
    Message,
    ModelRequest,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.providers.pricing import context_window_for, estimate_cost
from logos.result import Result
from logos.runners.jobs import JobRunner

MAX_EMPTY_REPLIES = 3
MAX_STREAM_INTERRUPTIONS = 3
MAX_WINDOW_SHRINKS = 3
WINDOW_SHRINK = 0.7
"""After the server says the conversation is too long, aim at this share of what was sent."""
STOP_JOBS_S = 30.0
"""At most this long, as a run ends, to stop its jobs (the runner's close ends the rest)."""


async def run(
    config: Config,
    history: Sequence[HistoryItem],
    prompt: str,
    callbacks: Callbacks | None = None,
    *,
    cancel: anyio.Event | None = None,
) -> RunResult:
    """Run the agent until the model answers without a block, or a limit stops it.

    Setting `cancel` stops the model stream and kills running commands, and the run
    returns with `stop_reason="canceled"`. Cancelling the calling task (an anyio cancel
    scope) does the same cleanup but propagates the cancellation, as anyio requires; use
    `Callbacks.on_step_end` to keep the steps in that case.
    """
    if config.mcp_servers:
        async with _mcp_tools(config) as with_tools:
            return await run(with_tools, history, prompt, callbacks, cancel=cancel)
    return await _Run(config, callbacks or Callbacks()).execute(
        normalize_history(history), prompt, cancel
    )


@asynccontextmanager
async def _mcp_tools(config: Config) -> AsyncIterator[Config]:
    """`config` with its MCP servers started, their tools among the loop's commands."""
    try:
        from logos.mcp.tools import connected_tools
    except ImportError as exc:
        raise ValueError(
            f"Config.mcp_servers needs the MCP SDK ({exc}): pip install 'logos[mcp]'"
        ) from None
    async with connected_tools(config.mcp_servers) as tools:
        system = config.system_prompt
        if system is not None:  # WHY: a written prompt has no place for them; add one
            system = system.rstrip("\n") + "\n\n" + tools.prompt_section()
        yield dataclasses.replace(
            config,
            mcp_servers=(),
            loop_commands=(*config.loop_commands, tools),
            system_prompt=system,
        )


def run_sync(
    config: Config,
    history: Sequence[HistoryItem],
    prompt: str,
    callbacks: Callbacks | None = None,
) -> RunResult:
    """`run()` for synchronous callers (starts its own event loop)."""

    async def main() -> RunResult:
        return await run(config, history, prompt, callbacks)

    return anyio.run(main)


@dataclass
class _Turn:
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


class _Run:
    def __init__(self, config: Config, callbacks: Callbacks) -> None:
        self.config = config
        self.callbacks = callbacks
        self.steps: list[StepMessage] = []
        self.usage = Usage()
        self.cost_usd = 0.0
        self.cost_known = True
        self.messages: list[Message] = []
        self.example: tuple[Message, ...] = ()
        self.answering_example: tuple[Message, ...] = ()
        self.current: _Turn | None = None
        self.canceled = False
        self.repeated_failures = (
            None
            if config.repeated_failure_note is None
            else RepeatedFailures(config.repeated_failure_note)
        )
        self.repetition = Repetition()
        after = config.exec_options.background_after_s
        self.jobs = (
            RunJobs(config.runner, callbacks.on_job_end)
            if after is not None and isinstance(config.runner, JobRunner)
            else None
        )
        self.families = [*config.loop_commands]
        if self.jobs is not None and after is not None:
            self.families.append(JobCommands(self.jobs, after))
        self.system = (
            build_system_prompt(
                working_dir=config.exec_options.resolved_workdir(),
                loop_commands=[line for family in self.families for line in family.usage],
            )
            if config.system_prompt is None
            else config.system_prompt
        )
        self.context_window = (
            config.context_window
            or config.provider.context_window
            or context_window_for(config.model_name)
        )

    async def execute(
        self, history: list[Message], prompt: str, cancel: anyio.Event | None
    ) -> RunResult:
        self.task = prompt
        examples = self.config.example
        if isinstance(examples, WorkedExamples):
            self.example = examples.turns(prompt)
            self.answering_example = examples.answering_turns(prompt)
        else:
            self.example = tuple(examples)
        self.messages = [*history, Message(role="user", content=prompt)]
        stop: StopReason = "error"
        error: str | None = None
        response = ""
        try:
            async with anyio.create_task_group() as watchers:
                if cancel is not None:
                    watchers.start_soon(self._cancel_when_set, cancel, watchers.cancel_scope)
                watchers.start_soon(self._prepare_runner)
                deadline = self.config.max_wall_s or math.inf
                with anyio.move_on_after(deadline) as wall:
                    try:
                        stop, error, response = await self._loop()
                    except ProviderError as exc:
                        stop, error = "error", exc.message
                    except LogosError as exc:
                        stop, error = "error", str(exc)
                    except Exception as exc:  # a bug must not lose the steps and usage
                        stop, error = "error", _describe_bug(exc)
                if wall.cancelled_caught:
                    stop, error = "max_wall_time", None
                watchers.cancel_scope.cancel()
            if self.canceled:
                stop, error, response = "canceled", None, ""
        finally:
            await self._keep_partial_turn(_why_unfinished(stop, error, self.canceled))
            await self._stop_jobs()
        return RunResult(
            response=response,
            steps=tuple(self.steps),
            stop_reason=stop,
            error=error,
            usage=self.usage,
            cost_usd=self.cost_usd if self.cost_known else None,
            jobs=tuple(self.jobs.ends) if self.jobs is not None else (),
        )

    async def _prepare_runner(self) -> None:
        """Let the runner get ready (start its sandbox) while the first model request is
        under way, so that the first block does not wait for it; the run's end cancels it."""
        # WHY a failure is dropped: preparing only saves time, and the first command reports
        # what stands in its way; a runner's bug here must not end the run.
        with contextlib.suppress(Exception):
            await self.config.runner.prepare(self.config.exec_options)

    async def _cancel_when_set(self, cancel: anyio.Event, scope: anyio.CancelScope) -> None:
        await cancel.wait()
        self.canceled = True
        scope.cancel()

    async def _loop(self) -> tuple[StopReason, str | None, str]:
        hallucinations = empty_replies = interruptions = 0
        # `acted`: the last reply that ran commands had one succeed (or go on as a job),
        # into no known trap (`logos.protocol.pitfalls`).
        ran_commands = acted = has_run_commands(self.messages)
        checked_back = jobs_told = must_answer = False
        for step in range(self.config.max_steps):
            budget = self._budget_stop()
            if budget is not None:
                return budget, None, ""
            # WHY "act" until a command succeeded, and again after a reply whose commands all
            # failed: a small model told its `sed -i` was refused, or shown an error, says
            # the work is done; made to write a block, it runs the command the refusal
            # offered, or fixes the one that failed. Repeating a failure forces an answer.
            kind: Turn = "answer" if must_answer else "reply" if acted else "act"
            # WHY not shown: with plain answers, once commands ran, a reply without a block
            # is asked again from the outputs; a small model's draft (often copied from the
            # worked example) would only be read as an answer that is not the one.
            last_turn = step == self.config.max_steps - 1
            draft = (
                self.config.plain_answers and ran_commands and kind != "answer" and not last_turn
            )
            turn = await self._turn_within_window(kind, shown=not draft)
            self.current = None
            # WHY in a row: a long run over a flaky network may see a few drops; only a
            # connection that keeps failing ends it.
            interruptions = interruptions + 1 if turn.interrupted is not None else 0
            if turn.interrupted is not None and not turn.text and not turn.blocks:
                if interruptions >= MAX_STREAM_INTERRUPTIONS:
                    return "error", _interrupted_error(turn.interrupted, interruptions), ""
                continue  # nothing was shown or run: ask again
            if not (turn.blocks or turn.unclosed_block):
                # WHY after the stream: with no block, nothing ran that a made-up result
                # could hide, and the whole reply tells a result from a mention of the tag.
                turn.fabricated_at = find_fabricated_result("".join(turn.text))
            await self._add_assistant(turn)

            notices = []
            if turn.interrupted is not None:
                if interruptions >= MAX_STREAM_INTERRUPTIONS:
                    await self._add_results(turn.results, [])
                    return "error", _interrupted_error(turn.interrupted, interruptions), ""
                notices.append(INTERRUPTED_NOTICE)
            if turn.unclosed_block:
                notices.append(unclosed_block_notice(turn.blocks))
            elif turn.finish == "length" and turn.blocks:
                notices.append(CUT_AFTER_BLOCKS_NOTICE)

            prose = "".join(turn.prose)
            marker = find_tool_call_hallucination(prose)
            fenced = None
            if marker is None and not (turn.blocks or turn.unclosed_block or ran_commands):
                # WHY only before any command ran: a final answer may show commands in a
                # fence; a first reply that holds one and no block meant to run it.
                fenced = find_fenced_command(prose)
            ran_commands = ran_commands or turn.blocks > 0
            if turn.results:
                acted = any(
                    (result.ok or result.job is not None) and pitfall_note(result) is None
                    for result in turn.results
                )
            if turn.fabricated_result and not turn.blocks:
                what = f"made-up results ({RESULT_TAG})"
                notice = FABRICATED_RESULT_NOTICE
            elif marker is not None and not turn.blocks:
                what = f"fake tool calls ({marker!r})"
                notice = not_run_notice(repr(marker), hallucinations + 1)
            elif fenced is not None:
                what = f"commands in code fences ({fenced!r})"
                notice = not_run_notice(
                    f"a command in a code fence ({fenced!r})", hallucinations + 1
                )
            else:
                what = notice = ""
            if notice:
                hallucinations += 1
                if hallucinations >= self.config.max_hallucinations:
                    return (
                        "hallucination_limit",
                        f"the model wrote {what} {hallucinations} times in a row instead of "
                        "<cmd> blocks",
                        "",
                    )
                notices.append(notice)
                await self._add_results([], notices)
                continue
            hallucinations = 0
            if turn.fabricated_result:
                notices.append(FABRICATED_RESULT_NOTICE)
            if marker is not None:
                notices.append(not_run_notice(repr(marker), 1))

            if turn.blocks or notices:
                empty_replies = 0
                must_answer = self.repetition.repeats(turn.results)
                if must_answer:
                    forced = self.config.grammars is not None
                    notices.append(repeated_reply_notice(forced, self.task))
                await self._add_results(turn.results, notices)
                continue
            answer = strip_cmd_blocks(turn.content)
            if self.config.plain_answers:
                answer = clean_answer(answer)
            if not answer.strip():
                empty_replies += 1
                if empty_replies >= MAX_EMPTY_REPLIES:
                    return "error", _empty_replies_error(empty_replies, turn.finish), ""
                await self._add_results([], [empty_reply_notice(turn.finish)])
                continue
            # WHY not on the last turn: with no turn left to answer it, a check-back (or
            # the jobs' notice) would only lose the answer.
            if (
                self.jobs is not None
                and not (jobs_told or last_turn)
                and await self.jobs.has_news()
            ):
                jobs_told = True
                empty_replies = 0
                running = await self.jobs.running()
                await self._add_results([], [running_jobs_notice(running)] if running else [])
                continue
            if self.config.plain_answers and ran_commands and kind != "answer" and not last_turn:
                # WHY: a small model's own answer at the end of the conversation copies the
                # worked example's ("Python: the directory holds setup.py") as often as it
                # reads the outputs; asked from the outputs alone, it reads them.
                must_answer = True
                await self._add_results([], [answer_notice(self.task)])
                continue
            if self.config.check_back and not (ran_commands or checked_back or last_turn):
                checked_back = True
                empty_replies = 0
                await self._add_results([], [CHECK_BACK_NOTICE])
                continue
            return "final", None, answer
        return "max_steps", None, ""

    async def _turn_within_window(self, kind: Turn, shown: bool = True) -> _Turn:
        """A model turn of this kind (which grammar it gets, `logos.protocol.grammar`). When the
        server says the conversation is longer than the model's context window (unknown to
        us, or smaller than we were told), older command outputs are elided further and the
        turn is asked again."""
        shrinks = 0
        while True:
            try:
                return await self._model_turn(kind, shown)
            except ContextWindowExceededError:
                shrinks += 1
                if shrinks > MAX_WINDOW_SHRINKS or not self._shrink_window():
                    raise
                await invoke_callback(
                    self.callbacks.on_retry,
                    "the conversation is longer than the model's context window: "
                    "eliding older command outputs",
                    shrinks,
                )

    def _shrink_window(self) -> bool:
        """Aim the elision below what was just sent; False when nothing is left to elide."""
        max_tokens = self.config.max_tokens
        conversation = self._conversation()
        sent = fit_to_window(self.system, conversation, self.context_window, max_tokens)
        sent_tokens = estimate_tokens(self.system, sent)
        window = math.ceil((sent_tokens * WINDOW_SHRINK + (max_tokens or 0)) / HEADROOM)
        shrunk = fit_to_window(self.system, conversation, window, max_tokens)
        if estimate_tokens(self.system, shrunk) >= sent_tokens:
            return False
        self.context_window = window
        return True

    def _conversation(self) -> list[Message]:
        """What the model is sent after the system prompt: the worked example (never elided:
        it holds no results to elide), then the conversation."""
        return [*self.example, *self.messages]

    async def _model_turn(self, kind: Turn, shown: bool) -> _Turn:
        turn = _Turn(shown=shown)
        self.current = turn
        config = self.config
        extra = config.provider_options
        if config.grammars is not None:
            extra = {**extra, "grammar": config.grammars.for_turn(kind)}
        system, conversation = self.system, self._conversation()
        if kind == "answer" and config.plain_answers:
            system = ANSWER_SYSTEM
            conversation = [
                *self.answering_example,
                *plain_answer_view(
                    self.task,
                    [result for step in self.steps for result in step.results],
                    config.exec_options.resolved_workdir() or os.getcwd(),
                ),
            ]
        request = ModelRequest(
            system=system,
            messages=fit_to_window(system, conversation, self.context_window, config.max_tokens),
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            extra=extra,
        )
        parser = CmdStreamParser()
        executor = BlockExecutor(
            config.runner,
            config.exec_options,
            max_concurrency=config.max_concurrency,
            policy=config.policy,
            on_start=self.callbacks.on_command_start,
            on_result=self.callbacks.on_command_result,
            on_output=self.callbacks.on_command_output,
            families=self.families,
        )
        turn.executor = executor
        failure: ProviderError | None = None
        async with executor:
            stream = config.provider.stream(request, self.callbacks.on_retry)
            try:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        turn.text.append(event.text)
                        for parsed in parser.feed(event.text):
                            await self._on_parsed(parsed, turn, executor)
                        if turn.fabricated_result:
                            break
                    elif isinstance(event, ReasoningDelta):
                        turn.reasoning.append(event.text)
                        await invoke_callback(self.callbacks.on_reasoning_delta, event.text)
                    elif isinstance(event, ReasoningSignature):
                        turn.signature.append(event.signature)
                    elif isinstance(event, RedactedReasoning):
                        turn.redacted.append(event.data)
                    elif isinstance(event, UsageReport):
                        turn.usage = event.usage
                        # WHY now, not after the commands: a wall clock or a cancel that
                        # stops them must not lose what the model has already spent.
                        self._account(event.usage)
                    elif isinstance(event, Finish):
                        turn.finish = event.reason
            except StreamInterruptedError as exc:
                turn.interrupted = exc
            except ProviderError as exc:
                failure = exc
                executor.cancel()  # the run ends: its commands' results would reach no one
            finally:
                # Closes the provider's HTTP response too, also when we stop reading early.
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
            if not turn.fabricated_result and failure is None:
                cut = turn.finish == "length" or turn.interrupted is not None
                for parsed in parser.close(truncated=cut):
                    await self._on_parsed(parsed, turn, executor)
        if failure is not None:
            raise failure
        turn.results = executor.results
        return turn

    async def _on_parsed(self, parsed: object, turn: _Turn, executor: BlockExecutor) -> None:
        if turn.fabricated_result:
            return  # what follows a made-up result (in the same delta) is not the model's act
        if isinstance(parsed, CommandBlock):
            executor.submit(parsed.command)
            turn.blocks += 1
        elif isinstance(parsed, ProseDelta):
            text = parsed.text
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
                    await invoke_callback(self.callbacks.on_delta, text)
        elif isinstance(parsed, UnclosedBlock):
            turn.unclosed_block = True

    def _account(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        cost = usage.cost_usd
        if cost is None:
            cost = estimate_cost(self.config.model_name, usage, self.config.prices)
        if cost is None:
            self.cost_known = False
        else:
            self.cost_usd += cost

    def _budget_stop(self) -> StopReason | None:
        config = self.config
        if (
            config.max_cost_usd is not None
            and self.cost_known
            and self.cost_usd >= config.max_cost_usd
        ):
            return "max_cost"
        spent = self.usage.total_input_tokens + self.usage.output_tokens
        if config.max_total_tokens is not None and spent >= config.max_total_tokens:
            return "max_tokens_budget"
        return None

    async def _add_assistant(self, turn: _Turn) -> None:
        step = turn.step()
        self.messages.extend(steps_to_messages([step]))
        await self._add_step(step)

    async def _add_results(self, results: Sequence[Result], notices: Sequence[str]) -> None:
        notes = pitfall_notes(results)
        if self.repeated_failures is not None:
            for position, note in self.repeated_failures.notes(results).items():
                notes[position] = f"{notes[position]} {note}" if position in notes else note
        job_ends = await self.jobs.take_unseen() if self.jobs is not None else []
        parts = (
            [format_results(results, notes=notes, job_ends=job_ends)] if results or job_ends else []
        )
        parts += notices
        step = StepMessage(
            role="result",
            content="\n\n".join(parts),
            results=tuple(results),
            block_notes=notes,
            job_ends=tuple(job_ends),
        )
        self.messages.extend(steps_to_messages([step]))
        await self._add_step(step)

    async def _add_step(self, step: StepMessage) -> None:
        self.steps.append(step)
        await invoke_callback(self.callbacks.on_step_end, step)

    async def _keep_partial_turn(self, why: str) -> None:
        """A turn cut by cancellation or the wall clock still belongs to the history, and
        so do its blocks' outcomes: those still running when it stopped were killed."""
        turn, self.current = self.current, None
        if turn is None or not (turn.text or turn.reasoning):
            return
        with anyio.CancelScope(shield=True):
            await self._add_step(turn.step())
            if turn.executor is not None and turn.blocks:
                results = turn.executor.results_so_far(
                    f"not finished: {why}, so the command was killed"
                )
                step = StepMessage(
                    role="result", content=format_results(results), results=tuple(results)
                )
                await self._add_step(step)

    async def _stop_jobs(self) -> None:
        """Stop the jobs still running: the run is ending, whatever ends it."""
        if self.jobs is None:
            return
        # WHY suppress: a runner that cannot stop them now (a daemon gone) ends them when
        # it is closed; the run's result must not be lost for it.
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(STOP_JOBS_S),
            contextlib.suppress(Exception),
        ):
            await self.jobs.stop_all()

    async def _jobs_have_news(self) -> bool:
        """Whether jobs still run, or ended with the model not shown their end yet."""
        return self.jobs is not None and await self.jobs.has_news()


def _why_unfinished(stop: StopReason, error: str | None, canceled: bool) -> str:
    if canceled or (stop == "error" and error is None):  # the cancel event or the caller's
        return "the run was canceled"
    if stop == "max_wall_time":
        return "the run reached its wall-clock limit"
    return "the run ended with an error"


def _interrupted_error(last: StreamInterruptedError, times: int) -> str:
    return (
        f"the model's answer broke off {times} times in a row; the last time: "
        f"{last.message.rstrip('.')}. Check the network or the server, then resume the run "
        "from its steps."
    )


def _describe_bug(exc: BaseException) -> str:
    """What failed, with the task group's wrapper opened: a callback that raised inside the
    command executor must be named, not reported as "unhandled errors in a TaskGroup"."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe_bug(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


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
