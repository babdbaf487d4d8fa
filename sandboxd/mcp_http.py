"""`sandboxd mcp --http`: the MCP server over streamable HTTP, on loopback, behind a bearer token.

Anything on the machine can reach a loopback port, and a web page can make the browser post to
one: so every request must carry the launch's token (`Authorization: Bearer ...`, compared in
constant time), its `Host` must name the loopback address it was sent to (a DNS-rebinding page
names its own), and an `Origin`, when present, must be one the launch allows.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import sys
from collections.abc import Sequence

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandboxd.mcp_limits import McpLaunch
from sandboxd.mcp_server import CLIENT_GONE, build_server

MCP_PATH = "/mcp"
SESSION_IDLE_TIMEOUT_S = 600.0
"""A session (and its sandbox) whose client sent nothing for this long is closed."""
MAX_SESSIONS = 32
MAX_REQUEST_BYTES = 1024 * 1024
_LOOPBACK_NAMES = ("localhost",)


class McpHttpError(Exception):
    """The HTTP server cannot start as asked; the message says why."""


def check_loopback(host: str) -> None:
    """Refuse any address but loopback: the server is for this machine's own clients."""
    if host in _LOOPBACK_NAMES:
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise McpHttpError(
        f"--http {host}: sandboxd mcp listens on loopback only (127.0.0.1, ::1 or localhost); "
        "reach it from elsewhere through an SSH tunnel"
    )


class BearerAuth:
    """Answer 401 to any request without the launch's bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self._app(scope, receive, send)
            return
        reason = (
            "missing bearer token: send Authorization: Bearer <token> (the token sandboxd mcp "
            "was launched with)"
            if not given
            else "wrong bearer token: use the token sandboxd mcp was launched with"
        )
        body = json.dumps({"error": "unauthorized", "message": reason}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="sandboxd-mcp"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class ClientGone:
    """Give each request an event its tool calls watch, set when its client disconnects."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        gone = anyio.Event()

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            return message

        await self._app({**scope, CLIENT_GONE: gone}, watched, send)


def http_app(
    launch: McpLaunch, *, host: str, port: int, token: str, origins: Sequence[str] = ()
) -> ASGIApp:
    """The server's ASGI app: token first, then the SDK's Host and Origin checks."""
    names = {host, "127.0.0.1", "localhost", "[::1]"}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{port}" for name in sorted(names)],
        allowed_origins=list(origins),
    )
    server = build_server(launch, one_client=False)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        host=host,
        session_idle_timeout=SESSION_IDLE_TIMEOUT_S,
        max_sessions=MAX_SESSIONS,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    return BearerAuth(ClientGone(app), token)


async def serve_http(
    launch: McpLaunch, *, host: str, port: int, token: str, origins: Sequence[str] = ()
) -> None:
    """Serve until stopped; says on stderr where (port 0 picks a free one)."""
    check_loopback(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise McpHttpError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound = listener.getsockname()[1]
    app = http_app(launch, host=host, port=bound, token=token, origins=origins)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    print(f"sandboxd mcp: serving on http://{shown}:{bound}{MCP_PATH}", file=sys.stderr, flush=True)
    await server.serve(sockets=[listener])
