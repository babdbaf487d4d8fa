"""An MCP server written for the tests with the MCP SDK (stdio, or streamable HTTP with
`--http PORT`): tools that answer, fail, print a lot, hang and crash, for a logos run to call."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer = MCPServer("notes")


@server.tool(description="Add two integers and return the sum.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Return the text, upper-cased.")
def shout(text: str, times: int = 1) -> str:
    return " ".join([text.upper()] * times)


@server.tool(description="Return `size` bytes of the letter x.")
def big(size: int) -> str:
    return "x" * size


@server.tool(description="Fail with a message, as a tool does when its work goes wrong.")
def refuse(reason: str) -> str:
    raise ToolError(f"refused: {reason}")


@server.tool(description="Sleep for `seconds`, then answer.")
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


@server.tool(description="Exit the server process at once.")
def crash() -> str:
    print("notes server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run()
