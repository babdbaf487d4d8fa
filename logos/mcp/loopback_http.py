"""An MCP server over streamable HTTP on loopback, behind a bearer token: what `sandboxd mcp
--http` and `logos mcp --http` share.

Every request passes `logos.access.guard` first (the launch's token, a `Host` naming the
server, an `Origin`, when present, that the launch allows), with the rules `logos serve`
follows; then the MCP SDK's own app, with its sessions and bodies bounded.

Imports only the MCP SDK, its web stack and `logos.access`: sandboxd uses it too.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from logos.access.guard import Access, AccessGuard
from logos.access.names import allowed_hosts, is_loopback

_MCP_PATH = "/mcp"
_SESSION_IDLE_TIMEOUT_S = 600.0
"""A session whose client sent nothing for this long is closed (and what it held with it)."""
_MAX_SESSIONS = 32
_MAX_REQUEST_BYTES = 1024 * 1024


class McpHttpError(Exception):
    """The HTTP server cannot start as asked; the message says why."""


@dataclass(frozen=True)
class LoopbackHttp:
    """Where and for whom: `name` is the command (`sandboxd mcp`) its messages name."""

    name: str
    host: str
    port: int
    token: str = field(repr=False)
    origins: Sequence[str] = ()


def check_loopback(name: str, host: str) -> None:
    """Refuse any address but loopback: the server is for this machine's own clients."""
    if not is_loopback(host):
        raise McpHttpError(
            f"--http {host}: {name} listens on loopback only (127.0.0.1, ::1 or localhost); "
            "reach it from elsewhere through an SSH tunnel"
        )


def guarded_app(
    server: MCPServer[Any], where: LoopbackHttp, inner: Callable[[ASGIApp], ASGIApp] = lambda a: a
) -> ASGIApp:
    """`server`'s streamable-HTTP app behind the access guard; `inner` wraps the SDK's app
    (under the guard)."""
    app = server.streamable_http_app(
        streamable_http_path=_MCP_PATH,
        # WHY off: the guard has checked Host and Origin already, by the rules every local
        # server follows (the SDK's would also refuse an SSH tunnel's port).
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=where.host,
        session_idle_timeout=_SESSION_IDLE_TIMEOUT_S,
        max_sessions=_MAX_SESSIONS,
        max_request_body_size=_MAX_REQUEST_BYTES,
    )
    access = Access(
        where.token,
        f"the token `{where.name}` was launched with",
        allowed_hosts(where.host),
        frozenset(where.origins),
        allow_origin_flag="--allow-origin",
    )
    return AccessGuard(inner(app), access)


async def serve_loopback(where: LoopbackHttp, app_for: Callable[[LoopbackHttp], ASGIApp]) -> None:
    """Serve the app `app_for` makes for the bound address until stopped; says on stderr
    where (port 0 picks a free one)."""
    check_loopback(where.name, where.host)
    family = socket.AF_INET6 if ":" in where.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((where.host, where.port))
        # WHY now: the address is printed below, and a client that reads it connects at once;
        # it waits in the backlog until uvicorn accepts, never refused.
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise McpHttpError(f"cannot listen on {where.host}:{where.port}: {exc.strerror}") from None
    bound = LoopbackHttp(
        where.name, where.host, listener.getsockname()[1], where.token, where.origins
    )
    server = uvicorn.Server(uvicorn.Config(app_for(bound), log_level="warning", lifespan="on"))
    shown = f"[{where.host}]" if ":" in where.host else where.host
    print(
        f"{where.name}: serving on http://{shown}:{bound.port}{_MCP_PATH}",
        file=sys.stderr,
        flush=True,
    )
    await server.serve(sockets=[listener])


def parse_http_address(value: str) -> tuple[str, int]:
    """`--http HOST:PORT` (IPv6 in brackets); ValueError with what to write."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http {value!r}: write HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)
