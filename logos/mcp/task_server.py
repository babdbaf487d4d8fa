"""`logos mcp`: an MCP server whose `task` tool hands a whole task to a logos agent.

The model, runner and limits are the launch's (the `logos mcp` command resolves them like
`logos run` does); a call can only narrow the limits. Each step is an MCP progress
notification; cancelling the call stops the run and kills its commands. A command that needs
approval is put to the person through the client (MCP elicitation); where the client cannot
ask, it is refused with the reason, and the model is told.

This module is the MCP surface only: running a task is the `RunTask` the command gives it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from logos.approvals.approval import ApprovalDecision, Approver
from logos.mcp.strict_arguments import UnknownArguments
from logos.options.declarations import MAX_COST, MAX_STEPS, MAX_TIME
from logos.options.narrowing import Asked, Ceiling, NarrowingRefused, narrowed
from logos.options.option import Option, Place, argument

TASK_TOOL = "task"
_MAX_TASK_CHARS = 64 * 1024
_MAX_PENDING_PROGRESS = 256
"""Progress messages waiting to be sent; more are dropped until the client catches up."""


@dataclass(frozen=True)
class TaskLimits:
    """A run's limits: the launch's (the widest a call may get), or one call's."""

    max_steps: int
    max_wall_s: float | None = None
    max_cost_usd: float | None = None


@dataclass(frozen=True)
class TaskCall:
    """One `task` call, for the `RunTask` that runs it."""

    task: str
    limits: TaskLimits
    progress: Callable[[str], None]
    """Say how the run goes (one line); sent to the client as a progress notification."""
    asker: Approver
    """Asks the person behind the client about a command (or refuses where it cannot)."""


class TaskOutput(BaseModel):
    answer: str = Field(description="the agent's final answer (its last reply's prose)")
    stop_reason: str = Field(description="final, max_steps, max_cost, canceled, error, ...")
    error: str | None
    steps: int = Field(description="model turns")
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(description="None when the price is not known")
    trajectory: str | None = Field(description="the file holding every step of the run")


RunTask = Callable[[TaskCall], Awaitable[TaskOutput]]


class Approval(BaseModel):
    """What the person answers about one command."""

    approve: bool = Field(description="run the command")
    reason: str = Field(default="", description="if not: why (told to the agent)")


class ElicitingApprover:
    """Puts each command to the person through the MCP client (elicitation), one at a time."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._lock = anyio.Lock()

    async def decide(self, command: str) -> ApprovalDecision:
        capabilities = self._ctx.client_capabilities
        if capabilities is None or capabilities.elicitation is None:
            return ApprovalDecision("no", command, reason=_CANNOT_ASK)
        async with self._lock:
            try:
                answer = await self._ctx.elicit(
                    f"The logos agent wants to run this command:\n\n{command}\n\nRun it?",
                    Approval,
                )
            except (NoBackChannelError, MCPError) as exc:
                return ApprovalDecision("no", command, reason=f"{_CANNOT_ASK} ({exc})")
        if not isinstance(answer, AcceptedElicitation):
            return ApprovalDecision("no", command, reason=f"the person chose {answer.action}")
        if not answer.data.approve:
            return ApprovalDecision("no", command, reason=answer.data.reason.strip() or None)
        return ApprovalDecision("yes", command)


_CANNOT_ASK = (
    "this command needs the person's approval, and the MCP client cannot ask them "
    "(no elicitation), so it was not run; do without it, or ask the person to launch "
    "`logos mcp` with --sandbox or --yes"
)


def build_task_server(limits: TaskLimits, run_task: RunTask, about: str) -> MCPServer:
    """The `logos mcp` server; `about` says what a task runs with (model, runner)."""
    server: MCPServer = MCPServer(
        "logos",
        instructions=f"Hands a whole task to a logos agent ({about}), which works on it with "
        "shell commands until it has an answer.",
        log_level="WARNING",
    )
    steps_most = limits.max_steps
    cost_note = "" if limits.max_cost_usd is None else f", at most {limits.max_cost_usd:g} USD"
    time_note = "" if limits.max_wall_s is None else f", at most {limits.max_wall_s:g} s"

    @server.tool(
        TASK_TOOL,
        description=f"Run a logos agent on a task ({about}) and return its answer, how it "
        f"stopped, what it used and cost, and where its trajectory was saved. At most "
        f"{steps_most} model turns{cost_note}{time_note}; the arguments can only lower them. "
        "Each step is reported as progress; cancelling the call stops the agent and its "
        "commands.",
        annotations=ToolAnnotations(destructive_hint=True, open_world_hint=True),
    )
    async def task(
        ctx: Context,
        task: Annotated[str, Field(min_length=1, max_length=_MAX_TASK_CHARS)],
        max_steps: Annotated[int | None, argument(MAX_STEPS)] = None,
        max_wall_s: Annotated[float | None, argument(MAX_TIME)] = None,
        max_cost_usd: Annotated[float | None, argument(MAX_COST)] = None,
    ) -> TaskOutput:
        asked = {MAX_STEPS: max_steps, MAX_TIME: max_wall_s, MAX_COST: max_cost_usd}
        call_limits = narrowed_limits(limits, asked)
        try:
            async with _progress(ctx) as progress:
                return await run_task(TaskCall(task, call_limits, progress, ElicitingApprover(ctx)))
        except* ToolError as failed:  # out of the progress task group, as the SDK expects it
            raise failed.exceptions[0] from None

    server.middleware.append(UnknownArguments(server))
    return server


def narrowed_limits(limits: TaskLimits, asked: Mapping[Option[Any], object]) -> TaskLimits:
    """The call's limits: the launch's, lowered where the call asks; ToolError to raise
    when it asks for more (`logos.options.narrowing`)."""
    ceiling = Ceiling.of(
        "this server",
        (Place.CONFIG_FILE, Place.COMMAND_LINE),
        {MAX_STEPS: limits.max_steps, MAX_TIME: limits.max_wall_s, MAX_COST: limits.max_cost_usd},
    )
    given = [
        Asked(option, option.name, value) for option, value in asked.items() if value is not None
    ]
    try:
        values = narrowed(ceiling, given)
    except NarrowingRefused as exc:
        raise ToolError(str(exc)) from None
    return TaskLimits(
        max_steps=values[MAX_STEPS] or limits.max_steps,
        max_wall_s=values[MAX_TIME],
        max_cost_usd=values[MAX_COST],
    )


@asynccontextmanager
async def _progress(ctx: Context) -> AsyncIterator[Callable[[str], None]]:
    """A sync `progress(line)` whose lines reach the client as progress notifications, in
    order, from a task of their own (the run's observers cannot wait)."""
    sender, receiver = anyio.create_memory_object_stream[str](_MAX_PENDING_PROGRESS)

    def progress(line: str) -> None:
        # WHY drop when full: a client that reads slowly misses some news, never the answer.
        with contextlib.suppress(
            anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            sender.send_nowait(line)

    async with anyio.create_task_group() as group:
        group.start_soon(_send_progress, ctx, receiver)
        try:
            yield progress
        finally:
            sender.close()


async def _send_progress(ctx: Context, lines: MemoryObjectReceiveStream[str]) -> None:
    sent = 0
    async with lines:
        async for line in lines:
            sent += 1
            # WHY suppress: progress is news; a client gone or a call cancelled must not
            # turn it into the call's failure.
            with contextlib.suppress(Exception):
                await ctx.report_progress(sent, None, line)
