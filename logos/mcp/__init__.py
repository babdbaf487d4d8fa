"""logos and the Model Context Protocol, both ways.

Inside a run, MCP servers' tools are commands the loop answers itself: `servers` says which
servers a run is given (a config file, `--mcp`, `Config.mcp_servers`), `tools` connects to them
and answers `mcp SERVER TOOL {...}` blocks (a `logos.commands.family.CommandFamily`). Outside,
`task_server` is `logos mcp`: a server whose `task` tool runs a logos agent for another agent.

`servers` and `tools` sit beside the commands (the agent opens a run's servers); `task_server`
is a front. The SDK (`mcp`, the `mcp` extra) is imported only by `tools` and `task_server`.
"""

__all__ = ["launch_failure", "loopback_http", "servers", "strict_arguments", "task_server", "tools"]
