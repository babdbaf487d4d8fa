"""An MCP server over streamable HTTP on loopback, behind a bearer token: what `sandboxd mcp
--http` and `logos mcp --http` share.

Anything on the machine can reach a loopback port, and a web page can make the browser post to
one: so every request must carry the launch's token (`Authorization: Bearer ...`, compared in
constant time), its `Host` must name the loopback address it was sent to (a DNS-rebinding page
names its own), and an `Origin`, when present, must be one the launch allows.

Imports only the MCP SDK and its web stack: sandboxd uses it too.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

MCP_PATH = "/mcp"
SESSION_IDLE_TIMEOUT_S = 600.0
"""A session whose client sent nothing for this long is closed (and what it held with it)."""
MAX_SESSIONS = 32
MAX_REQUEST_BYTES = 1024 * 1024
_LOOPBACK_NAMES = ("localhost",)


class McpHttpError(Exception):
    """The HTTP server cannot start as asked; the message says why."""


@dataclass(frozen=True)
class LoopbackHttp:
    """Where and for whom: `name` is the command (`sandboxd mcp`) its messages name."""

    name: str
    host: str
    port: int
    token: str
    origins: Sequence[str] = ()


def check_loopback(name: str, host: str) -> None:
    """Refuse any address but loopback: the server is for this machine's own clients."""
    if host in _LOOPBACK_NAMES:
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise McpHttpError(
        f"--http {host}: {name} listens on loopback only (127.0.0.1, ::1 or localhost); "
        "reach it from elsewhere through an SSH tunnel"
    )


class BearerAuth:
    """Answer 401 to any request without the launch's bearer token."""

    def __init__(self, app: ASGIApp, token: str, name: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()
        self._name = name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self._app(scope, receive, send)
            return
        reason = (
            f"missing bearer token: send Authorization: Bearer <token> (the token {self._name} "
            "was launched with)"
            if not given
            else f"wrong bearer token: use the token {self._name} was launched with"
        )
        body = json.dumps({"error": "unauthorized", "message": reason}).encode()
        realm = self._name.replace(" ", "-")
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", f'Bearer realm="{realm}"'.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def guarded_app(
    server: MCPServer[Any], where: LoopbackHttp, inner: Callable[[ASGIApp], ASGIApp] = lambda a: a
) -> ASGIApp:
    """`server`'s streamable-HTTP app: the token first, then the SDK's Host and Origin
    checks; `inner` wraps the SDK's app (under the token check)."""
    names = {where.host, "127.0.0.1", "localhost", "[::1]"}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{where.port}" for name in sorted(names)],
        allowed_origins=list(where.origins),
    )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        host=where.host,
        session_idle_timeout=SESSION_IDLE_TIMEOUT_S,
        max_sessions=MAX_SESSIONS,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    return BearerAuth(inner(app), where.token, where.name)


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
        f"{where.name}: serving on http://{shown}:{bound.port}{MCP_PATH}",
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
