"""`sandboxd mcp`: an MCP server whose tools run commands through the daemon.

`server` (the tools, one sandbox session per client), `limits` (the launch's limits and a
call's narrowing of them), `launch_file` (`--config`) and `http` (over loopback HTTP).

A client of the daemon like `SandboxRunner`: it imports the client side, never the
server's internals (lint-imports checks it).
"""

__all__ = ["http", "launch_file", "limits", "server"]
