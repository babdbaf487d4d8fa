"""What both MCP servers of this project do when their launch is wrong (a bad option, no model,
no sandbox daemon): serve the reason over stdio instead of exiting.

WHY: an MCP client (an editor) starts the server itself and shows little or nothing of its
stderr; a server that exits before the handshake is only "Connection closed" there. One that
stays up says why in its initialize result's instructions, lists the tools the launch would
have served, and answers every call to them with the same reason as a tool error, until the
client stops it.

Imports only the MCP SDK: sandboxd's `sandboxd mcp` uses it too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def _launch_failure_message(name: str, reason: str) -> str:
    """The reason in the words every place shows it (instructions, tool errors, stderr)."""
    return (
        f"{name} could not start: {reason.rstrip('.')}. Fix the launch (the command, its "
        "arguments and environment in this MCP client's configuration), then restart the server."
    )


async def serve_launch_failure(name: str, reason: str, tools: Iterable[str]) -> None:
    """Serve, on stdin/stdout until the client goes, a server that only says why `name` could
    not start; it lists `tools` (those a good launch serves), each answering with the reason."""
    message = _launch_failure_message(name, reason)
    print(f"{name}: {reason}", file=sys.stderr, flush=True)  # the client's log of the server
    failed: MCPServer[Any] = MCPServer(name, instructions=message, log_level="WARNING")

    async def refuse() -> str:
        raise ToolError(message)

    for tool in tools:
        failed.add_tool(refuse, name=tool, description=message, structured_output=False)
    await failed.run_stdio_async()
