"""`sandboxd mcp --http`: the MCP server over streamable HTTP on loopback behind a bearer token
(`logos.mcp.loopback_http`), each request's disconnect watched so that a call whose connection
breaks stops its command."""

from __future__ import annotations

from functools import partial

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from logos.mcp.loopback_http import LoopbackHttp, guarded_app, serve_loopback
from sandboxd.mcp.limits import McpLaunch
from sandboxd.mcp.server import CLIENT_GONE, build_server

NAME = "sandboxd mcp"


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


def _http_app(launch: McpLaunch, where: LoopbackHttp) -> ASGIApp:
    return guarded_app(build_server(launch, one_client=False), where, ClientGone)


async def serve_http(launch: McpLaunch, where: LoopbackHttp) -> None:
    """Serve until stopped; says on stderr where (port 0 picks a free one)."""
    await serve_loopback(where, partial(_http_app, launch))
