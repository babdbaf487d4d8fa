"""`sandboxd mcp`: sandboxd's sandboxes as MCP tools, for any agent that takes in MCP servers.

A client of the daemon like any other (it runs commands through `SandboxRunner`, never the
daemon's internals). Each MCP client gets one sandbox session: files a call writes outside the
allowed paths (its /tmp, $HOME) are there for the next call, its jobs go on between calls, and
the session (with whatever still runs in it) is closed when the client goes. Where the
protocol has no session (a 2026-07-28 client over HTTP sends each call on its own), each call
gets a sandbox of its own, closed when the call ends.

What a call may see is the launch's (`McpLaunch`), narrowed per call (`mcp_limits`).
"""

# WHY no `from __future__ import annotations`: the SDK reads each tool's annotations at
# registration, and they name the launch's limits (locals of _add_tools).
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field
from starlette.requests import Request

from logos.mcp.strict_arguments import UnknownArguments
from logos.options.declarations import ALLOW, ALLOW_HOST, TIMEOUT
from logos.options.option import MAX_LIST, argument
from logos.result import JobEnd, Result
from sandboxd.client.runner import SandboxForkError, SandboxRunner
from sandboxd.mcp.limits import (
    MAX_COMMAND_BYTES,
    McpLaunch,
    NarrowingError,
    PathAsk,
    narrowed_options,
)

SERVER_NAME = "sandboxd"
_MAIN_SANDBOX = "main"
_CONNECTION_KEY = "sandboxd.client"
CLIENT_GONE = "sandboxd.client_gone"
"""The ASGI scope key of an `anyio.Event` set when the HTTP request's client disconnects."""
T = TypeVar("T")

_INSTRUCTIONS = (
    "Runs shell commands in sandboxd's Docker sandboxes: no network unless the server was "
    "launched with it, only the host paths it was launched with. Files written outside those "
    "paths (/tmp, $HOME) stay for your later calls; everything is removed when you disconnect. "
    "A command still running after the launch's background threshold goes on as a job: "
    "job_wait, job_status and job_kill follow it. fork copies the sandbox for a parallel try."
)


class PathArgument(BaseModel):
    """A host path the call's sandbox sees: one the server was launched with, or under it."""

    path: str = Field(max_length=4096, description="absolute host path")
    writable: bool = Field(
        default=False, description="read-write (only where the launch allows it)"
    )


class RunOutput(BaseModel):
    """What happened to one command, field by field."""

    stdout: str
    stderr: str
    exit_code: int | None = Field(description="None when it was killed or never started")
    signal: str | None = Field(description="the signal that ended it, e.g. SIGKILL")
    timed_out: bool
    truncated: bool = Field(description="the middle of stdout or stderr was cut")
    stdout_dropped_bytes: int
    stderr_dropped_bytes: int
    stdout_file: str | None = Field(description="inside the sandbox: the whole stdout")
    stderr_file: str | None
    duration_s: float
    oom_killed: bool
    blocked: list[str] = Field(description="connections the egress proxy refused")
    job_id: str | None = Field(description="set when the command goes on as a job")
    error: str | None = Field(description="why it could not run")


class JobItem(BaseModel):
    job_id: str
    command: str
    running_s: float


class JobsOutput(BaseModel):
    jobs: list[JobItem]


class JobWaitOutput(BaseModel):
    job_id: str
    running: bool = Field(description="still running after the wait")
    result: RunOutput | None


class ForkOutput(BaseModel):
    sandboxes: list[str] = Field(description="names to pass as `sandbox` to the other tools")


@dataclass(eq=False)
class ClientSandboxes:
    """One client's sandbox session and its forks."""

    launch: McpLaunch
    in_session: bool
    """Its sandboxes last across calls (a session): jobs and forks make sense."""
    runners: dict[str, SandboxRunner] = field(default_factory=dict)
    forks_made: int = 0
    limiter: anyio.CapacityLimiter = field(init=False)

    def __post_init__(self) -> None:
        self.limiter = anyio.CapacityLimiter(self.launch.max_concurrent_calls)
        self.runners[_MAIN_SANDBOX] = SandboxRunner(
            self.launch.socket,
            f"mcp-{secrets.token_hex(6)}",
            self.launch.image,
            self.launch.network,
        )

    def runner(self, name: str | None) -> SandboxRunner:
        found = self.runners.get(name or _MAIN_SANDBOX)
        if found is None:
            known = ", ".join(self.runners)
            raise ToolError(f"there is no sandbox {name!r} (this client has: {known})")
        return found

    async def aclose(self) -> None:
        """Close every sandbox session: whatever runs in them is killed."""
        with anyio.CancelScope(shield=True):
            for runner in self.runners.values():
                with contextlib.suppress(Exception):
                    await runner.aclose()


class Sandboxes:
    """Which `ClientSandboxes` a call uses: the process's own (stdio: one client per process),
    its connection's (a session over HTTP), or one for the call alone."""

    def __init__(self, launch: McpLaunch, *, one_client: bool) -> None:
        self.launch = launch
        self._one_client = one_client
        self._shared: ClientSandboxes | None = None

    @asynccontextmanager
    async def for_call(self, ctx: Context) -> AsyncIterator[ClientSandboxes]:
        if self._one_client:
            if self._shared is None:
                self._shared = ClientSandboxes(self.launch, in_session=True)
            yield self._shared
            return
        connection = ctx.request_context.session._connection
        # WHY the SDK's private field: the connection (its state and its teardown when the
        # client goes) is what a session's sandbox lives and dies with; tools are handed only
        # the per-request session that wraps it.
        if connection.session_id is None:
            own = ClientSandboxes(self.launch, in_session=False)
            try:
                yield own
            finally:
                await own.aclose()
            return
        found = connection.state.get(_CONNECTION_KEY)
        if not isinstance(found, ClientSandboxes):
            found = ClientSandboxes(self.launch, in_session=True)
            connection.state[_CONNECTION_KEY] = found
            connection.exit_stack.push_async_callback(found.aclose)
        yield found

    async def aclose(self) -> None:
        if self._shared is not None:
            await self._shared.aclose()


def build_server(launch: McpLaunch, *, one_client: bool) -> MCPServer[Sandboxes]:
    """The MCP server; `one_client`: one client for the process's life (stdio)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Sandboxes]) -> AsyncIterator[Sandboxes]:
        sandboxes = Sandboxes(launch, one_client=one_client)
        try:
            yield sandboxes
        finally:
            await sandboxes.aclose()

    server: MCPServer[Sandboxes] = MCPServer(
        SERVER_NAME,
        instructions=_INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
    )
    _add_tools(server, launch)
    server.middleware.append(UnknownArguments(server))
    return server


def _sandboxes(ctx: Context) -> Sandboxes:
    found = ctx.request_context.lifespan_context
    assert isinstance(found, Sandboxes)
    return found


Command = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_COMMAND_BYTES,
        description="a bash command line (pipes, &&, redirections work)",
    ),
]
Sandbox = Annotated[
    str | None, Field(default=None, max_length=64, description="a fork's name (default: main)")
]


def _add_tools(server: MCPServer[Sandboxes], launch: McpLaunch) -> None:
    _add_run_tool(server, launch)
    _add_job_tools(server, launch)
    if launch.max_forks > 0:
        _add_fork_tool(server, launch)


def _run_description(launch: McpLaunch) -> str:
    """What the run tool tells the client's model: the launch's paths, network and limits."""
    shown_paths = ", ".join(
        f"{p.path} ({'ro' if p.read_only else 'rw'})" for p in launch.allowed_paths
    )
    run_description = (
        "Run a bash command in the sandbox and return its output and how it ended (exit code, "
        "signal, timeout, truncation). Host paths it sees: "
        f"{shown_paths or 'none'}; network: "
        f"{'on' if launch.network else ', '.join(launch.allowed_hosts) or 'off'}. "
        "paths, hosts, timeout_s and env can only narrow what the server was launched with "
        f"(timeout_s at most {launch.max_timeout_s:g} s; paths and hosts by default the "
        "launch's)."
    )
    if launch.background_after_s is not None:
        run_description += (
            f" A command still running after {launch.background_after_s:g} s goes on as a "
            "job (job_id set): follow it with job_wait."
        )
    return run_description


def _add_run_tool(server: MCPServer[Sandboxes], launch: McpLaunch) -> None:
    @server.tool(
        "run",
        description=_run_description(launch),
        annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False),
    )
    async def run(
        ctx: Context,
        command: Command,
        workdir: Annotated[
            str | None, Field(max_length=4096, description="inside one of the paths")
        ] = None,
        timeout_s: Annotated[float | None, argument(TIMEOUT)] = None,
        env: Annotated[
            dict[str, str] | None, Field(description="variables for this command only")
        ] = None,
        paths: Annotated[
            list[PathArgument] | None,
            Field(max_length=MAX_LIST, description=ALLOW.help),
        ] = None,
        hosts: Annotated[list[str] | None, argument(ALLOW_HOST)] = None,
        sandbox: Sandbox = None,
    ) -> Annotated[CallToolResult, RunOutput]:
        async with _sandboxes(ctx).for_call(ctx) as client:
            try:
                options = narrowed_options(
                    launch,
                    paths=None
                    if paths is None
                    else [PathAsk(path=p.path, writable=p.writable) for p in paths],
                    hosts=hosts,
                    env=env,
                    workdir=workdir,
                    timeout_s=timeout_s,
                    background=client.in_session,
                )
            except NarrowingError as exc:
                raise ToolError(str(exc)) from None
            runner = client.runner(sandbox)
            async with client.limiter:
                result = await _unless_client_goes(ctx, partial(runner.run, command, options))
        return _tool_result(_run_output(result))


def _add_job_tools(server: MCPServer[Sandboxes], launch: McpLaunch) -> None:
    @server.tool(
        "job_status",
        description="The jobs still running in a sandbox (commands that went on past the "
        "background threshold).",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def job_status(ctx: Context, sandbox: Sandbox = None) -> JobsOutput:
        async with _sandboxes(ctx).for_call(ctx) as client:
            jobs = await client.runner(sandbox).list_jobs()
        return JobsOutput(
            jobs=[JobItem(job_id=j.id, command=j.command, running_s=j.running_s) for j in jobs]
        )

    @server.tool(
        "job_wait",
        description="Wait for a job to end (at most timeout_s) and return its result; "
        "running=true when it still runs.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def job_wait(
        ctx: Context,
        job_id: Annotated[str, Field(min_length=1, max_length=32)],
        timeout_s: Annotated[float, Field(gt=0, le=launch.max_timeout_s)] = 60.0,
        sandbox: Sandbox = None,
    ) -> JobWaitOutput:
        async with _sandboxes(ctx).for_call(ctx) as client:
            try:
                end = await _unless_client_goes(
                    ctx, partial(client.runner(sandbox).wait_job, job_id, timeout_s)
                )
            except LookupError as exc:
                raise ToolError(f"{exc}: job_status lists the jobs still running") from None
        return _job_output(job_id, end)

    @server.tool(
        "job_kill",
        description="Stop a job and everything it started; returns how it ended.",
        annotations=ToolAnnotations(destructive_hint=True),
    )
    async def job_kill(
        ctx: Context,
        job_id: Annotated[str, Field(min_length=1, max_length=32)],
        sandbox: Sandbox = None,
    ) -> JobWaitOutput:
        async with _sandboxes(ctx).for_call(ctx) as client:
            try:
                end = await client.runner(sandbox).kill_job(job_id)
            except LookupError as exc:
                raise ToolError(f"{exc}: job_status lists the jobs still running") from None
        return _job_output(job_id, end)


def _add_fork_tool(server: MCPServer[Sandboxes], launch: McpLaunch) -> None:
    @server.tool(
        "fork",
        description="Copy the main sandbox (what its commands changed in /tmp and $HOME) into "
        "new sandboxes, to try things side by side; pass a returned name as `sandbox` to run. "
        f"A client holds at most {launch.max_forks} forks.",
    )
    async def fork(
        ctx: Context,
        count: Annotated[int, Field(ge=1, le=launch.max_forks)] = 1,
        share_writable_mounts: Annotated[
            bool,
            Field(description="let the forks write to the same read-write host paths"),
        ] = False,
    ) -> ForkOutput:
        async with _sandboxes(ctx).for_call(ctx) as client:
            if not client.in_session:
                raise ToolError(
                    "fork needs a session: this connection sends each call on its own, so "
                    "there is no sandbox to fork; connect over stdio or with the session "
                    "(initialize) protocol"
                )
            if client.forks_made + count > launch.max_forks:
                raise ToolError(
                    f"this client holds {client.forks_made} of at most {launch.max_forks} forks"
                )
            try:
                forks = await client.runner(_MAIN_SANDBOX).fork(
                    count, share_writable_mounts=share_writable_mounts
                )
            except SandboxForkError as exc:
                raise ToolError(str(exc)) from None
            names = []
            for runner in forks:
                client.forks_made += 1
                name = f"fork-{client.forks_made}"
                client.runners[name] = runner
                names.append(name)
        return ForkOutput(sandboxes=names)


async def _unless_client_goes(ctx: Context, call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, cancelled (killing its command) if the HTTP connection that asked for it
    breaks: streamable HTTP keeps the request going for a client that may come back, but
    without an event store its answer has nowhere to go."""
    request = ctx.request_context.request
    gone = request.scope.get(CLIENT_GONE) if isinstance(request, Request) else None
    if not isinstance(gone, anyio.Event):
        return await call()
    outcome: list[T] = []
    async with anyio.create_task_group() as group:

        async def cancel_when_gone() -> None:
            await gone.wait()
            group.cancel_scope.cancel()

        group.start_soon(cancel_when_gone)
        outcome.append(await call())
        group.cancel_scope.cancel()
    if not outcome:
        raise ToolError("the client's connection closed mid-call: the command was stopped")
    return outcome[0]


def _run_output(result: Result) -> RunOutput:
    return RunOutput(
        stdout=result.stdout,
        stderr=result.stderr,
        exit_code=result.exit_code,
        signal=result.signal_name,
        timed_out=result.timed_out,
        truncated=bool(result.stdout_dropped_bytes or result.stderr_dropped_bytes),
        stdout_dropped_bytes=result.stdout_dropped_bytes,
        stderr_dropped_bytes=result.stderr_dropped_bytes,
        stdout_file=result.stdout_file,
        stderr_file=result.stderr_file,
        duration_s=round(result.duration_s, 3),
        oom_killed=result.oom_killed,
        blocked=list(result.blocked),
        job_id=None if result.job is None else result.job.id,
        error=result.error,
    )


def _job_output(job_id: str, end: JobEnd | None) -> JobWaitOutput:
    if end is None:
        return JobWaitOutput(job_id=job_id, running=True, result=None)
    return JobWaitOutput(job_id=job_id, running=False, result=_run_output(end.result))


def _tool_result(output: RunOutput) -> CallToolResult:
    """The output as structured content, and as text a model reads at a glance."""
    return CallToolResult(
        content=[TextContent(type="text", text=_run_text(output))],
        structured_content=output.model_dump(mode="json"),
        is_error=output.error is not None,
    )


def _run_text(output: RunOutput) -> str:
    """One status line, then each non-empty stream under its name."""
    if output.error is not None:
        status = f"could not run: {output.error}"
    elif output.job_id is not None:
        status = f"still running after {output.duration_s:g} s: it goes on as job {output.job_id}"
    elif output.timed_out:
        status = f"timed out after {output.duration_s:g} s"
    elif output.signal is not None:
        status = f"killed by {output.signal} after {output.duration_s:g} s"
    else:
        status = f"exit code {output.exit_code} in {output.duration_s:g} s"
    if output.oom_killed:
        status += " (out of memory)"
    parts = [status]
    for name, text, dropped, saved in (
        ("stdout", output.stdout, output.stdout_dropped_bytes, output.stdout_file),
        ("stderr", output.stderr, output.stderr_dropped_bytes, output.stderr_file),
    ):
        if text:
            parts.append(f"--- {name} ---\n{text.rstrip(chr(10))}")
        if dropped:
            where = f"; all of it is in {saved}" if saved else ""
            parts.append(f"({dropped} bytes of {name} cut from the middle{where})")
    parts.extend(f"blocked: {line}" for line in output.blocked)
    return "\n".join(parts)


async def serve_stdio(launch: McpLaunch) -> None:
    """Serve one client on stdin/stdout until it goes."""
    await build_server(launch, one_client=True).run_stdio_async()
