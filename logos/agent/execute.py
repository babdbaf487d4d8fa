"""Run a message's command blocks concurrently; results come back in block order.

A block that is exactly one of the commands the loop answers itself (`logos.commands.family`)
is answered by its family, before the policy and the runner see it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import anyio
from anyio.abc import TaskGroup

from logos.approvals.approval import ApprovalRunner
from logos.approvals.policy import CommandPolicy, check_command
from logos.callback import invoke_callback
from logos.commands.family import CommandFamily
from logos.options import ExecOptions
from logos.result import Result
from logos.runners.base import Runner
from logos.runners.live import FLUSH_S, LiveOutput, LivePiece, watching

_DEFAULT_MAX_CONCURRENCY = 8

P = ParamSpec("P")
T = TypeVar("T")

OnCommandStart = Callable[[int, str], Awaitable[None] | None]
OnCommandResult = Callable[[int, Result], Awaitable[None] | None]
OnCommandOutput = Callable[[int, LivePiece], Awaitable[None] | None]


class BlockExecutor:
    """Starts each command the moment it is submitted and collects results in order.

    The loop submits blocks while the model is still streaming, so command time overlaps
    generation; `execute_blocks` is the batch form. Leaving the `async with` waits for
    every command; cancelling it kills them (the runners own that).
    """

    def __init__(
        self,
        runner: Runner,
        options: ExecOptions,
        *,
        max_concurrency: int = _DEFAULT_MAX_CONCURRENCY,
        policy: CommandPolicy = check_command,
        on_start: OnCommandStart | None = None,
        on_result: OnCommandResult | None = None,
        on_output: OnCommandOutput | None = None,
        families: Sequence[CommandFamily] = (),
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self._runner = runner
        self._options = options
        self._policy = policy
        self._families = tuple(families)
        self._on_start = on_start
        self._on_result = on_result
        self._on_output = on_output
        self._limiter = anyio.CapacityLimiter(max_concurrency)
        self._commands: list[str] = []
        self._results: list[Result | None] = []
        self._task_group: TaskGroup | None = None

    async def __aenter__(self) -> BlockExecutor:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._task_group is not None
        return await self._task_group.__aexit__(*exc_info)

    def submit(self, command: str) -> int:
        """Start `command` now (subject to the concurrency limit); returns its block index."""
        if self._task_group is None:
            raise RuntimeError("submit() needs the executor to be entered with `async with`")
        index = len(self._results)
        self._commands.append(command)
        self._results.append(None)
        self._task_group.start_soon(self._run_one, index, command)
        return index

    def cancel(self) -> None:
        """Kill every command still running; their results are not wanted any more."""
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()

    @property
    def results(self) -> list[Result]:
        """Results in submission order; complete once the `async with` block has exited."""
        missing = [i for i, result in enumerate(self._results) if result is None]
        if missing:
            raise RuntimeError(f"blocks {missing} have not finished")
        return [result for result in self._results if result is not None]

    def results_so_far(self, unfinished: str) -> list[Result]:
        """Every submitted block's result; a block that never finished gets `unfinished`.

        WHY: a run stopped mid-command still records what each block came to, so a resumed
        conversation never holds blocks without results.
        """
        return [
            result if result is not None else Result(command=command, error=unfinished)
            for command, result in zip(self._commands, self._results, strict=True)
        ]

    async def _run_one(self, index: int, command: str) -> None:
        family = _family_of(self._families, command)
        if family is not None:
            # WHY outside the concurrency limit: it starts no process (a `wait` may take
            # the block's whole timeout without holding a place a command needs).
            await invoke_callback(self._on_start, index, command)
            result = await self._answer(family, command)
        elif (refusal := _check_contained(self._policy, command)) is not None:
            result = Result(command=command, error=refusal)
        else:
            async with self._limiter:
                await invoke_callback(self._on_start, index, command)
                result = await self._run_watched(index, command)
        self._results[index] = result
        await invoke_callback(self._on_result, index, result)

    async def _run_watched(self, index: int, command: str) -> Result:
        """Run `command`, handing what it prints to `on_output` while it runs (on a runner
        that can tell: `logos.runners.live`)."""
        if self._on_output is None:
            return await _run_contained(self._runner, command, self._options)
        live = LiveOutput()
        async with anyio.create_task_group() as relays:
            relays.start_soon(self._relay, index, live)
            with watching(live):
                result = await _run_contained(self._runner, command, self._options)
            live.close()
            relays.cancel_scope.cancel()
        return result

    async def _relay(self, index: int, live: LiveOutput) -> None:
        while True:
            await anyio.sleep(FLUSH_S)
            for piece in live.take():
                await invoke_callback(self._on_output, index, piece)

    async def _answer(self, family: CommandFamily, command: str) -> Result:
        async def answer(approved: str) -> Result:
            if not family.matches(approved):
                return Result(
                    command=approved,
                    error="the edited command is not one logos answers itself like the one "
                    "it replaced, so it was not run; write it in a block of its own",
                )
            try:
                return await family.run(approved, self._options)
            except Exception as exc:  # a family's bug reaches the model, never the turn
                return Result(
                    command=approved, error=f"logos failed to answer: {type(exc).__name__}: {exc}"
                )

        if family.needs_approval and isinstance(self._runner, ApprovalRunner):
            return await self._runner.run_approved(command, answer)
        return await answer(command)


async def execute_blocks(
    commands: Sequence[str],
    runner: Runner,
    options: ExecOptions | None = None,
    *,
    max_concurrency: int = _DEFAULT_MAX_CONCURRENCY,
    policy: CommandPolicy = check_command,
    families: Sequence[CommandFamily] = (),
) -> list[Result]:
    """Run `commands` concurrently on `runner`; results in input order.

    A command the policy refuses is not run: its result carries the policy's message. A
    command of one of the `families` is answered by it (`logos.commands.family`).
    """
    executor = BlockExecutor(
        runner,
        options or ExecOptions(),
        max_concurrency=max_concurrency,
        policy=policy,
        families=families,
    )
    async with executor:
        for command in commands:
            executor.submit(command)
    return executor.results


def _blocking(function: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """`function` for synchronous callers: each call runs it in an event loop of its own."""

    @functools.wraps(function)
    def in_own_event_loop(*args: P.args, **kwargs: P.kwargs) -> T:
        return anyio.run(functools.partial(function, *args, **kwargs))

    in_own_event_loop.__name__ = in_own_event_loop.__qualname__ = f"{function.__name__}_sync"
    in_own_event_loop.__doc__ = (
        f"`{function.__name__}` for synchronous callers (starts its own event loop)."
    )
    return in_own_event_loop


execute_blocks_sync = _blocking(execute_blocks)


def _family_of(families: Sequence[CommandFamily], command: str) -> CommandFamily | None:
    return next((family for family in families if family.matches(command)), None)


def _check_contained(policy: CommandPolicy, command: str) -> str | None:
    """A policy that fails refuses: a command nobody could check must not run."""
    try:
        return policy(command)
    except Exception as exc:
        return (
            f"the command policy failed ({type(exc).__name__}: {exc}), so the command was "
            "not run; try a simpler form of the command"
        )


async def _run_contained(runner: Runner, command: str, options: ExecOptions) -> Result:
    """A runner bug must reach the model as a result, never abort the whole turn."""
    try:
        return await runner.run(command, options)
    except Exception as exc:
        return Result(command=command, error=f"runner failed: {type(exc).__name__}: {exc}")
