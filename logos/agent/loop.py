"""The agent loop: prompt → model → `<cmd>` blocks → concurrent execution → `<result>` → model.

Stateless: the caller passes the history in and gets the new steps back. Blocks start the
moment they close in the stream (`logos.agent.turn`), so command time hides behind the
model's generation. Each reply is classified and read by the run's checks
(`logos.agent.checks`, listed by its `logos.agent.replies.ReplyPolicy`): everything the model
can get wrong (fake tool calls, commands in code fences, empty replies, a reply cut inside a
block, made-up results, the same commands again, an answer before any command ran) is
answered with a corrective message (`logos.protocol.notices`) rather than a crash, and every
way a run can end keeps the steps and the usage spent so far.

Commands still running at `ExecOptions.background_after_s` go on as jobs (on a runner that
keeps them): the next envelope after a job ends carries its end, the model waits for or
stops one with commands the loop answers itself (`logos.commands.job_commands`), an answer given
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

import anyio

from logos.agent.checks import plain_answers
from logos.agent.checks.base import EndRun, RunState, run_checks
from logos.agent.checks.reply import read_reply
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
from logos.agent.turn import StreamedTurn, TurnReader
from logos.callback import invoke_callback
from logos.commands.job_commands import JobCommands
from logos.commands.run_jobs import RunJobs
from logos.errors import ContextWindowExceededError, LogosError, ProviderError
from logos.protocol.envelope import format_results
from logos.protocol.grammar import Turn
from logos.protocol.pitfalls import pitfall_notes
from logos.protocol.plain_answer import ANSWER_SYSTEM, plain_answer_view
from logos.protocol.prompt import build_system_prompt
from logos.protocol.repeated_failure import RepeatedFailures
from logos.protocol.worked_examples import WorkedExamples
from logos.providers.base import Message, ModelRequest, Usage
from logos.providers.pricing import context_window_for, estimate_cost
from logos.result import Result
from logos.runners.job_runner import JobRunner

_MAX_WINDOW_SHRINKS = 3
_WINDOW_SHRINK = 0.7
"""After the server says the conversation is too long, aim at this share of what was sent."""
_STOP_JOBS_S = 30.0
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


class _Run:
    def __init__(self, config: Config, callbacks: Callbacks) -> None:
        self.config = config
        self.callbacks = callbacks
        self.policy = config.replies
        self.steps: list[StepMessage] = []
        self.usage = Usage()
        self.cost_usd = 0.0
        self.cost_known = True
        self.messages: list[Message] = []
        self.example: tuple[Message, ...] = ()
        self.answering_example: tuple[Message, ...] = ()
        self.current: StreamedTurn | None = None
        self.canceled = False
        self.checks = self.policy.checks(config.max_hallucinations)
        note = self.policy.repeated_failure_note
        self.repeated_failures = None if note is None else RepeatedFailures(note)
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
        examples = self.policy.examples
        if isinstance(examples, WorkedExamples):
            self.example = examples.turns(prompt)
            self.answering_example = examples.answering_turns(prompt)
        else:
            self.example = tuple(examples)
        self.messages = [*history, Message(role="user", content=prompt)]
        ran = has_run_commands(self.messages)
        self.state = RunState(task=prompt, jobs=self.jobs, ran_commands=ran, acted=ran)
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
                        response, stop = await self._loop(), "final"
                    except EndRun as end:
                        stop, error, response = end.reason, end.error, end.answer
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

    async def _loop(self) -> str:
        """Turns until an answer stands: each reply is classified, read by the policy's
        checks, then answered with its results and their notices. A check, a budget or the
        step limit ends the run by raising `EndRun`."""
        state = self.state
        for number in range(self.config.max_steps):
            self._check_budget()
            kind = state.start_turn(last=number == self.config.max_steps - 1)
            shown = not self.policy.plain_answers or plain_answers.shown(state, kind)
            turn = await self._turn_within_window(kind, shown)
            self.current = None
            reply = read_reply(
                turn, ran_commands=state.ran_commands, clean=self.policy.plain_answers
            )
            if not reply.lost:
                await self._add_assistant(turn)
            state.took(reply)
            try:
                verdict = await run_checks(self.checks, reply, state)
            except EndRun:
                if reply.results:
                    await self._add_results(reply.results, [])
                raise
            if verdict.answer is not None:
                return verdict.answer
            if not reply.lost:
                await self._add_results(reply.results, verdict.notices)
        raise EndRun("max_steps")

    async def _turn_within_window(self, kind: Turn, shown: bool = True) -> StreamedTurn:
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
                if shrinks > _MAX_WINDOW_SHRINKS or not self._shrink_window():
                    raise
                await invoke_callback(
                    self.callbacks.on_retry,
                    "the conversation is longer than the model's context window: "
                    "eliding older command outputs",
                    shrinks,
                )

    def _shrink_window(self) -> bool:
        """Aim the elision below what was just sent; False when nothing is left to elide."""
        max_tokens = self.config.reply_max_tokens
        conversation = self._conversation()
        sent = fit_to_window(self.system, conversation, self.context_window, max_tokens)
        sent_tokens = estimate_tokens(self.system, sent)
        window = math.ceil((sent_tokens * _WINDOW_SHRINK + (max_tokens or 0)) / HEADROOM)
        shrunk = fit_to_window(self.system, conversation, window, max_tokens)
        if estimate_tokens(self.system, shrunk) >= sent_tokens:
            return False
        self.context_window = window
        return True

    def _conversation(self) -> list[Message]:
        """What the model is sent after the system prompt: the worked example (never elided:
        it holds no results to elide), then the conversation."""
        return [*self.example, *self.messages]

    def _request(self, kind: Turn) -> ModelRequest:
        """The request for a turn of this kind: its grammar, and for an answer turn with
        plain answers, the plain view of the task and the outputs instead of the
        conversation (`logos.protocol.plain_answer`)."""
        config = self.config
        plain = kind == "answer" and self.policy.plain_answers
        extra = config.provider_options
        if self.policy.grammars is not None:
            extra = {**extra, "grammar": self._grammar(kind, plain)}
        system, conversation = self.system, self._conversation()
        if plain:
            system, conversation = ANSWER_SYSTEM, self._plain_view()
        max_tokens = config.reply_max_tokens
        return ModelRequest(
            system=system,
            messages=fit_to_window(system, conversation, self.context_window, max_tokens),
            max_tokens=max_tokens,
            temperature=config.reply_temperature,
            extra=extra,
        )

    def _grammar(self, kind: Turn, plain: bool) -> str:
        """The turn's grammar (`logos.protocol.grammar`); an answer asked again in the form
        the task asks for is held to that form (`logos.protocol.answer_form`)."""
        assert self.policy.grammars is not None
        form = self.state.form
        if plain and self.state.held_to_form and form is not None and form.grammar:
            return form.grammar
        return self.policy.grammars.for_turn(kind)

    def _plain_view(self) -> list[Message]:
        """The examples shown when answering, then the task, the outputs, and what the
        checks added: the form the task asks for, when the answer is asked again in it
        (`RunState.held_to_form`), and their notes (`RunState.answer_notes`).

        WHY not the form the first time: the task says it already; said twice, the default
        model's three bullets on this repository's README turned from its loop and its
        commands to its local models."""
        state = self.state
        form = state.form if state.held_to_form else None
        asks = [*([form.instruction] if form is not None else []), *state.answer_notes]
        view = plain_answer_view(
            state.task,
            state.results,
            self.config.exec_options.resolved_workdir() or os.getcwd(),
            asks,
        )
        return [*self.answering_example, *view]

    async def _model_turn(self, kind: Turn, shown: bool) -> StreamedTurn:
        turn = StreamedTurn(shown=shown)
        self.current = turn
        config = self.config
        request = self._request(kind)
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
        reader = TurnReader(
            turn,
            executor,
            self._account,
            on_delta=self.callbacks.on_delta,
            on_reasoning_delta=self.callbacks.on_reasoning_delta,
        )
        async with executor:
            failure = await reader.read(config.provider.stream(request, self.callbacks.on_retry))
        if failure is not None:
            raise failure
        turn.results = executor.results
        return turn

    def _account(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        cost = usage.cost_usd
        if cost is None:
            cost = estimate_cost(self.config.model_name, usage, self.config.prices)
        if cost is None:
            self.cost_known = False
        else:
            self.cost_usd += cost

    def _check_budget(self) -> None:
        config = self.config
        if (
            config.max_cost_usd is not None
            and self.cost_known
            and self.cost_usd >= config.max_cost_usd
        ):
            raise EndRun("max_cost")
        spent = self.usage.total_input_tokens + self.usage.output_tokens
        if config.max_total_tokens is not None and spent >= config.max_total_tokens:
            raise EndRun("max_tokens_budget")

    async def _add_assistant(self, turn: StreamedTurn) -> None:
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
            anyio.move_on_after(_STOP_JOBS_S),
            contextlib.suppress(Exception),
        ):
            await self.jobs.stop_all()


def _why_unfinished(stop: StopReason, error: str | None, canceled: bool) -> str:
    if canceled or (stop == "error" and error is None):  # the cancel event or the caller's
        return "the run was canceled"
    if stop == "max_wall_time":
        return "the run reached its wall-clock limit"
    return "the run ended with an error"


def _describe_bug(exc: BaseException) -> str:
    """What failed, with the task group's wrapper opened: a callback that raised inside the
    command executor must be named, not reported as "unhandled errors in a TaskGroup"."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe_bug(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
