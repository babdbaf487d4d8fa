"""sandboxd: a daemon that runs commands in Docker containers that see only allowed paths.

A request's way through it, a subpackage at each step: `client` (the caller's side of the
Unix socket) → `server` (HTTP, the routes, admission, the audit log) → `policy` (what the
request may have) → `sessions` (caps, warm pool, jobs) → `docker` (the Backend: containers
and the supervisor's channel) → `inside` (the only code that runs in the container).
`egress` is the proxy through which a sandbox without network reaches the hosts it may;
`mcp` is `sandboxd mcp`, a client like the runner. At the root: what the parts share (the
wire models `api`, the `backend` protocol, where the socket lives `paths`, `sizes`) and the
`sandboxd` command (`cli`, `doctor`).
"""

__all__ = ["api", "cli", "client", "docker", "server", "sizes"]
