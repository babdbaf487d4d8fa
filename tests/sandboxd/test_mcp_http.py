"""`sandboxd mcp --http`: streamable HTTP on loopback, driven by the MCP SDK's own client and by
raw HTTP for what a client must not get through, against a real daemon and engine. The token,
Host and Origin checks every local server shares: tests/security/test_local_server_access.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp_servers import (
    INITIALIZE,
    TOKEN,
    HttpServer,
    cancel_once_running,
    http_server,
)
from tests.support.processes import processes_matching, until_gone
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def server(daemon: Daemon) -> Iterator[HttpServer]:
    root = short_dir("mcph")
    (root / "rw").mkdir()
    with http_server(
        "sandboxd",
        "mcp",
        "--socket",
        str(daemon.socket),
        "--allow",
        f"{root / 'rw'}:rw",
        "--background-after",
        "5",
        log_dir=root,
    ) as serving:
        yield serving


def sessions(daemon: Daemon) -> set[str]:
    with daemon.client() as http:
        return {s["id"] for s in http.get("/v1/sessions").json()["sessions"]}


def connect(server: HttpServer, mode: str = "legacy", **headers: str) -> Client:
    transport = streamable_http_client(server.url, http_client=server.client(**headers))
    return Client(transport, mode=mode)


def post(server: HttpServer, body: Any, **headers: str) -> httpx.Response:
    with httpx.Client(timeout=30) as http:
        return http.post(
            server.url,
            content=body if isinstance(body, bytes) else json.dumps(body),
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}", **headers},
        )


async def test_a_session_keeps_its_sandbox_until_the_client_goes(
    server: HttpServer, daemon: Daemon
) -> None:
    before = sessions(daemon)
    async with connect(server) as client:
        await client.call_tool("run", {"command": "echo kept > /tmp/note"})
        again = await client.call_tool("run", {"command": "cat /tmp/note"})
        opened = sessions(daemon) - before
    assert again.structured_content is not None
    assert again.structured_content["stdout"] == "kept\n"
    assert len(opened) == 1
    with anyio.fail_after(30):
        while opened & sessions(daemon):
            await anyio.sleep(0.2)


async def test_without_a_session_each_call_has_a_sandbox_of_its_own(
    server: HttpServer, daemon: Daemon
) -> None:
    before = sessions(daemon)
    async with connect(server, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        await client.call_tool("run", {"command": "echo kept > /tmp/note"})
        again = await client.call_tool("run", {"command": "cat /tmp/note 2>&1"})
        fork = await client.call_tool("fork", {})
        left = sessions(daemon) - before
    assert again.structured_content is not None
    assert "No such file" in again.structured_content["stdout"]
    assert fork.is_error
    assert "fork needs a session" in fork.content[0].text  # type: ignore[union-attr]
    assert left == set()


def test_malformed_and_oversized_requests_get_clear_errors(server: HttpServer) -> None:
    broken = post(server, b'{"jsonrpc": "2.0", "id": 1, "method": ')
    not_rpc = post(server, {"hello": "world"})
    huge = post(server, b"{" + b" " * (2 * 1024 * 1024) + b"}")
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == -32700
    assert not_rpc.status_code == 400
    assert huge.status_code == 413
    assert post(server, INITIALIZE).status_code == 200


async def test_a_client_that_vanishes_mid_call_leaves_nothing(
    server: HttpServer, daemon: Daemon, marker: str
) -> None:
    before = sessions(daemon)
    async with connect(server) as client:
        call = {"command": f"sleep {marker}", "timeout_s": 120}
        await cancel_once_running(partial(client.call_tool, "run", call), f"sleep {marker}")
    with anyio.fail_after(30):
        while sessions(daemon) - before or processes_matching(f"sleep {marker}"):
            await anyio.sleep(0.2)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--http", "0.0.0.0:8765"], "loopback only"),
        (["--http", "127.0.0.1:8765"], "needs a bearer token"),
        (["--http", "8765"], "write HOST:PORT"),
    ],
)
def test_http_launch_mistakes_are_explained(argv: list[str], expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SANDBOXD_MCP_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "sandboxd", "mcp", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert expected in done.stderr


async def test_a_dropped_connection_mid_call_kills_the_command(
    server: HttpServer, daemon: Daemon, marker: str
) -> None:
    """No DELETE, no cancellation: the client's connection just breaks while its call runs."""
    opened = post(server, INITIALIZE)
    session = opened.headers["mcp-session-id"]
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **headers)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "run", "arguments": {"command": f"sleep {marker}", "timeout_s": 120}},
    }
    async with httpx.AsyncClient(timeout=120) as http:
        call_over_http = partial(
            http.post,
            server.url,
            json=call,
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}", **headers},
        )
        # Cancelling the post closes the connection under the running call.
        await cancel_once_running(call_over_http, f"sleep {marker}")
    with anyio.fail_after(30):
        await until_gone(f"sleep {marker}")


async def test_stopping_the_server_closes_its_clients_sandboxes(daemon: Daemon) -> None:
    before = sessions(daemon)
    with http_server(
        "sandboxd", "mcp", "--socket", str(daemon.socket), log_dir=short_dir("mcps")
    ) as own:
        try:
            async with connect(own) as client:
                await client.call_tool("run", {"command": "true"})
                opened = sessions(daemon) - before
                assert len(opened) == 1
                own.proc.terminate()
                # WHY -SIGTERM: uvicorn re-raises the signal once it has shut down gracefully.
                assert own.proc.wait(timeout=30) in (0, -signal.SIGTERM), own.output()
        except* httpx2.ConnectError:
            pass  # WHY: the client's last message may or may not find its server still there
    with anyio.fail_after(30):
        while opened & sessions(daemon):
            await anyio.sleep(0.2)
