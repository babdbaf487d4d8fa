"""Who may reach what logos keeps and serves, under one set of rules for every local server
(`logos serve` and `logos view`, `logos mcp --http`, `sandboxd mcp --http`): private
directories, the bearer token's file, the names a request may give (`Host`, `Origin`) and
what counts as loopback, and the guard that checks each request.

A leaf of logos (the standard library only; the guard names the ASGI types for the type
checker), so that sandboxd may import it.
"""

__all__ = ["guard", "names", "private_dirs", "token_file"]
