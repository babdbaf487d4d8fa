"""MCP servers' tools as commands the loop answers itself: `mcp SERVER TOOL {"arg": ...}`.

The system prompt lists each tool in one line (its arguments in a compact form); `mcp SERVER`
shows a server's tools in full. Arguments are checked against the tool's input schema before
the call, and a block that does not fit gets a correction instead of a call. A call is bounded
like a command: the run's timeout, and its output cut to the run's limit. They go through the
run's approval and audit like shell commands (`needs_approval`).

Each server is held by a task of its own: one that crashes or hangs takes only its own tools
down (the model is told why), never the run.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

import anyio
import httpx2
import jsonschema
from anyio.abc import TaskGroup
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult, TextContent, Tool

from logos.mcp.servers import McpServer
from logos.options import ExecOptions
from logos.result import Result
from logos.runners.capture import OutputCapture

_MAX_ARGUMENT_BYTES = 64 * 1024
"""A longer argument object is refused before the call: write the data to a file instead."""
MAX_TOOLS_LISTED = 40
"""Of one server, in the system prompt; `mcp SERVER` lists them all."""
_MAX_DESCRIPTION_CHARS = 120
"""Of a tool's description in the system prompt; `mcp SERVER` shows it whole."""
_STDERR_TAIL_BYTES = 600
_COMMAND = re.compile(
    r"\s*mcp\s+(?P<server>[A-Za-z0-9_-]{1,32})(?:\s+(?P<tool>[^\s{]+))?(?:\s+(?P<args>\{.*\}|\S.*))?\s*",
    re.DOTALL,
)


@dataclass(eq=False)
class _Connection:
    """One server, as held by its task."""

    spec: McpServer
    client: Client | None = None
    tools: dict[str, Tool] = field(default_factory=dict)
    problem: str | None = None
    """Why its tools cannot be used (never started, or stopped)."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stderr: TextIO | None = None

    def stopped(self, why: str) -> None:
        if self.problem is None:
            self.problem = why + self._stderr_tail()
        self.client = None

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.flush()
            self.stderr.seek(0)
            tail = self.stderr.read()[-_STDERR_TAIL_BYTES:].strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends with: {tail}" if tail else ""


class McpTools:
    """The MCP tools of one run (a `logos.commands.family.CommandFamily`); open it with
    `connected_tools`."""

    needs_approval = True
    """A tool can do anything its server can: it is put to the run's approval like a command."""

    def __init__(self, connections: Sequence[_Connection]) -> None:
        self._connections = {c.spec.name: c for c in connections}

    @property
    def usage(self) -> Sequence[str]:
        lines = [
            "`mcp SERVER TOOL {JSON arguments}` calls a tool of an MCP server (one JSON object, "
            "in one block of its own) and answers like a command; `mcp SERVER` shows a "
            "server's tools in full. The tools:"
        ]
        for connection in self._connections.values():
            name = connection.spec.name
            if connection.problem is not None:
                lines.append(f"MCP server `{name}` is not available: {connection.problem}")
                continue
            tools = list(connection.tools.values())
            for tool in tools[:MAX_TOOLS_LISTED]:
                lines.append(
                    f"`mcp {name} {tool.name} {_compact_arguments(tool.input_schema)}`: "
                    f"{_short(tool.description)}"
                )
            if len(tools) > MAX_TOOLS_LISTED:
                lines.append(
                    f"… and {len(tools) - MAX_TOOLS_LISTED} more tools of `{name}`: "
                    f"`mcp {name}` lists them all"
                )
        return lines

    def prompt_section(self) -> str:
        """The usage as a section of its own, for a system prompt written without it."""
        bullets = "\n".join(f"- {line}" for line in self.usage)
        return f"## MCP tools\n{bullets}\n"

    def matches(self, command: str) -> bool:
        found = _COMMAND.fullmatch(command)
        return found is not None and found["server"] in self._connections

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.monotonic()
        found = _COMMAND.fullmatch(command)
        assert found is not None, "run() is asked only for commands that match"
        connection = self._connections[found["server"]]
        name = connection.spec.name

        def failed(error: str) -> Result:
            return Result(command=command, error=error, duration_s=time.monotonic() - started)

        if connection.problem is not None or connection.client is None:
            return failed(f"MCP server {name} is not available: {connection.problem}")
        if found["tool"] is None:
            return _answer(command, started, _tool_listing(connection), options)
        tool = connection.tools.get(found["tool"])
        if tool is None:
            known = ", ".join(connection.tools) or "none"
            return failed(f"MCP server {name} has no tool {found['tool']!r}; its tools: {known}")
        arguments = _arguments(found["args"], tool, name)
        if isinstance(arguments, str):
            return failed(arguments)
        try:
            with anyio.fail_after(options.timeout_s):
                called = await connection.client.call_tool(tool.name, arguments)
        except TimeoutError:
            return failed(
                f"MCP server {name} did not answer {tool.name} within {options.timeout_s:g} s; "
                "the call was abandoned"
            )
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                return failed(f"MCP server {name} refused to call {tool.name}: {exc.message}")
            return failed(self._lost(connection, exc))
        except Exception as exc:
            return failed(self._lost(connection, exc))
        return _called(command, started, called, options)

    @staticmethod
    def _lost(connection: _Connection, exc: Exception) -> str:
        """The server is gone (it exited, or its connection broke): its tools are no more."""
        connection.stopped(f"it stopped ({_why(exc)})")
        connection.scope.cancel()
        return (
            f"MCP server {connection.spec.name} stopped during the call, so its tools cannot "
            f"be used any more in this run: {connection.problem}"
        )


@asynccontextmanager
async def connected_tools(servers: Sequence[McpServer]) -> AsyncIterator[McpTools]:
    """Start (or connect to) each server and list its tools, all at once; a server that does
    not start in its `start_timeout_s` is reported in the tools' usage, not raised. Each is
    stopped when the block ends."""
    connections = [_Connection(spec) for spec in servers]
    async with anyio.create_task_group() as holders:
        async with anyio.create_task_group() as starting:
            for connection in connections:
                starting.start_soon(_start, holders, connection)
        try:
            yield McpTools(connections)
        finally:
            holders.cancel_scope.cancel()


async def _start(holders: TaskGroup, connection: _Connection) -> None:
    ready = anyio.Event()
    holders.start_soon(_hold, connection, ready)
    timeout = connection.spec.start_timeout_s
    with anyio.move_on_after(timeout):
        await ready.wait()
    if not ready.is_set():
        connection.scope.cancel()
        connection.stopped(f"it did not start and list its tools within {timeout:g} s")


async def _hold(connection: _Connection, ready: anyio.Event) -> None:
    """Keep the server's session open until the run ends; note why it stopped if it does."""
    spec = connection.spec
    try:
        with connection.scope, _stderr_file(spec) as stderr:
            connection.stderr = stderr
            async with Client(_transport(spec, stderr)) as client:
                listed = await client.list_tools()
                connection.tools = {tool.name: tool for tool in listed.tools}
                connection.client = client
                ready.set()
                await anyio.sleep_forever()
    except Exception as exc:
        connection.stopped(f"it stopped: {_why(exc)}" if ready.is_set() else _why(exc))
    finally:
        ready.set()
        if connection.client is not None:
            connection.stopped("the run ended")


def _stderr_file(spec: McpServer) -> AbstractContextManager[TextIO | None]:
    """Where a stdio server's stderr goes: a file of its own, whose end explains a crash (the
    run's terminal is not the server's)."""
    if spec.url is not None:
        return contextlib.nullcontext()
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def _transport(spec: McpServer, stderr: TextIO | None) -> Any:
    if spec.url is not None:
        http = httpx2.AsyncClient(headers=dict(spec.headers), timeout=httpx2.Timeout(300.0))
        return streamable_http_client(spec.url, http_client=http)
    parameters = StdioServerParameters(
        command=spec.command[0], args=list(spec.command[1:]), env=dict(spec.env), cwd=spec.cwd
    )
    return stdio_client(parameters, errlog=stderr or sys.stderr)


def _arguments(text: str | None, tool: Tool, server: str) -> dict[str, Any] | str:
    """The call's arguments, or a correction for the model."""
    example = f"`mcp {server} {tool.name} {_compact_arguments(tool.input_schema)}`"
    if text is None:
        arguments: Any = {}
    elif len(text.encode()) > _MAX_ARGUMENT_BYTES:
        return (
            f"the arguments are {len(text.encode())} bytes, more than {_MAX_ARGUMENT_BYTES}: "
            "write large data to a file and pass its path"
        )
    else:
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"the arguments must be one JSON object ({exc.msg} at {exc.pos}): {example}"
    if not isinstance(arguments, dict):
        return f"the arguments must be one JSON object, not {type(arguments).__name__}: {example}"
    validator = jsonschema.validators.validator_for(tool.input_schema)(tool.input_schema)
    problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if problems:
        listed = "; ".join(
            f"{'.'.join(str(p) for p in problem.absolute_path) or 'arguments'}: {problem.message}"
            for problem in problems[:5]
        )
        return f"the arguments do not fit {tool.name}'s input schema ({listed}): {example}"
    return arguments


def _compact_arguments(schema: Mapping[str, Any]) -> str:
    """`{"path": string, "limit"?: integer}`: the argument names and types, optional ones
    marked, for the system prompt."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return "{}"
    required = set(schema.get("required", ()))
    parts = []
    for name, spec in properties.items():
        mark = "" if name in required else "?"
        parts.append(f'"{name}"{mark}: {_type_name(spec)}')
    return "{" + ", ".join(parts) + "}"


def _type_name(spec: Any) -> str:
    if not isinstance(spec, Mapping):
        return "any"
    if "enum" in spec:
        return "|".join(json.dumps(v) for v in spec["enum"][:6])
    kind = spec.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"[{_type_name(spec.get('items'))}]"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = spec.get(key)
        if isinstance(options, list):
            return "|".join(_type_name(option) for option in options)
    return "any"


def _short(description: str | None) -> str:
    text = " ".join((description or "").split())
    if not text:
        return "(no description)"
    return text if len(text) <= _MAX_DESCRIPTION_CHARS else text[: _MAX_DESCRIPTION_CHARS - 1] + "…"


def _tool_listing(connection: _Connection) -> str:
    lines = []
    for tool in connection.tools.values():
        lines.append(f"{tool.name}: {tool.description or '(no description)'}")
        lines.append(f"  arguments: {json.dumps(tool.input_schema, separators=(',', ':'))}")
    return "\n".join(lines) + "\n" if lines else "this server has no tools\n"


def _called(command: str, started: float, called: CallToolResult, options: ExecOptions) -> Result:
    pieces = []
    for block in called.content:
        if isinstance(block, TextContent):
            pieces.append(block.text)
        else:
            pieces.append(f"[{block.type} content]")
    if not pieces and called.structured_content is not None:
        pieces.append(json.dumps(called.structured_content))
    text = "\n".join(pieces)
    if text and not text.endswith("\n"):
        text += "\n"
    if called.is_error:
        return Result(
            command=command,
            stderr=_bounded(text, options),
            exit_code=1,
            duration_s=time.monotonic() - started,
        )
    return _answer(command, started, text, options)


def _answer(command: str, started: float, text: str, options: ExecOptions) -> Result:
    capture = OutputCapture(options.max_output_bytes)
    capture.write(text.encode())
    kept = capture.finish()
    return Result(
        command=command,
        stdout=kept.text,
        exit_code=0,
        stdout_dropped_bytes=kept.dropped_bytes,
        duration_s=time.monotonic() - started,
    )


def _bounded(text: str, options: ExecOptions) -> str:
    capture = OutputCapture(options.max_output_bytes)
    capture.write(text.encode())
    return capture.finish().text


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_why(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
