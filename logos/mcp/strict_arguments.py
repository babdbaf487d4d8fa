"""A check both MCP servers of this project put before their tools: a call with an argument its
tool does not take is refused (the SDK would drop it, and a misspelt limit, `timeout` for
`timeout_s`, must not be silently ignored).

Imports only the MCP SDK: sandboxd's `sandboxd mcp` uses it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS


class UnknownArguments:
    """Server middleware (`MCPServer.middleware`): refuses a `tools/call` with an argument
    its tool's input schema does not list, naming the ones it takes."""

    def __init__(self, server: MCPServer[Any]) -> None:
        self._server = server
        self._taken: dict[str, frozenset[str]] | None = None

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            arguments = params.get("arguments")
            if isinstance(arguments, Mapping):
                await self._refuse_unknown(str(params.get("name")), arguments)
        return await call_next(ctx)

    async def _refuse_unknown(self, name: str, arguments: Mapping[str, Any]) -> None:
        if self._taken is None:
            self._taken = {
                tool.name: frozenset(tool.input_schema.get("properties", {}))
                for tool in await self._server.list_tools()
            }
        taken = self._taken.get(name)
        unknown = sorted(set(arguments) - taken) if taken is not None else []
        if unknown:
            raise MCPError(
                INVALID_PARAMS,
                f"tool {name} takes no argument {', '.join(unknown)}: it takes "
                f"{', '.join(sorted(taken or ())) or 'none'}",
            )
