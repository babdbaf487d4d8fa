"""The daemon's server: what a request passes through, from the socket to the backend.

`http` (HTTP/1.1 on the Unix socket, the caller's credentials), `app` (one dispatch, its
error mapping and the request's audit line) and `routes/` (the handlers, by family), with
`admission` (output memory in flight), `audit` (the audit log), `config` (the daemon's TOML
file), `backends` (the backend the config names, built) and `daemon`, `process` (the
daemon's lifecycle and its process limits).

It may import every part of sandboxd it serves (policy, sessions, egress, the backend
protocol and the Docker backend it builds), never the client side; only the `sandboxd`
command (`sandboxd.cli`, `sandboxd.doctor`) imports it.
"""

__all__ = ["backends", "config", "daemon", "state_dir"]
