"""MCP servers of this project, launched as their users launch them, for real MCP clients: the
SDK's own `mcp.Client` (stdio and streamable HTTP) and the MCP Inspector's CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
from mcp import StdioServerParameters

from tests.support.parts import require
from tests.support.processes import log_text, processes_matching, start_logged, stop_server

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef-0123456789"


def stdio_server(
    module: str, *args: str, env: dict[str, str] | None = None, cwd: Path = REPO
) -> StdioServerParameters:
    """`python -m MODULE ARGS` over stdio, as an editor's config launches it; `env` is its
    whole environment (default: this process's)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", module, *args],
        env=dict(os.environ) if env is None else env,
        cwd=cwd,
    )


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return log_text(self.log)

    def client(self, token: str | None = TOKEN, **headers: str) -> httpx2.AsyncClient:
        """An HTTP client for the SDK's transport, sending `token` (None: no Authorization)."""
        if token is not None:
            headers = {"Authorization": f"Bearer {token}", **headers}
        return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0))


@contextlib.contextmanager
def http_server(
    module: str,
    *args: str,
    log_dir: Path,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
) -> Iterator[HttpServer]:
    """`python -m MODULE ARGS --http 127.0.0.1:0` with the test token (`env`: its whole
    environment, default this process's); stopped after."""
    log = log_dir / f"mcp-http-{time.monotonic_ns()}.log"
    proc = start_logged(
        [sys.executable, "-m", module, *args, "--http", "127.0.0.1:0"],
        log=log,
        cwd=cwd,
        env={
            **(dict(os.environ) if env is None else env),
            "SANDBOXD_MCP_TOKEN": TOKEN,
            "LOGOS_MCP_TOKEN": TOKEN,
        },
    )
    deadline = time.monotonic() + 60
    url = None
    while url is None:
        found = re.search(r"serving on (http://\S+)", log_text(log))
        if found:
            url = found.group(1)
        elif proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the MCP HTTP server did not start:\n{log_text(log)}")
        else:
            time.sleep(0.05)
    server = HttpServer(proc, url, log)
    try:
        yield server
    finally:
        if proc.poll() is None:
            stop_server(proc, "the MCP server", server.output, signal.SIGTERM, 30)


def inspector() -> str:
    """The MCP Inspector's executable, as scripts/setup-mcp installs it."""
    found = REPO / ".cache/npm/node_modules/.bin/mcp-inspector"
    require(found.exists(), "the MCP Inspector is missing: run ./scripts/setup-mcp")
    return os.fspath(found)


def inspect(
    target: Sequence[str], *method: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`mcp-inspector --cli TARGET --method ...`: the Inspector's CLI mode, one request."""
    with tempfile.TemporaryDirectory() as home:
        return subprocess.run(
            [inspector(), "--cli", *target, *method],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            # WHY: the Inspector keeps a catalog of servers; never the user's.
            env={**os.environ, "MCP_CATALOG_PATH": f"{home}/mcp.json", "HOME": home},
        )


INITIALIZE: dict[str, object] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
"""A raw client's opening request (the 2025 handshake)."""


def raw_lines(*requests: dict[str, object]) -> bytes:
    """What a client writes on a stdio server's stdin to open a session and send `requests`:
    one JSON-RPC message per line."""
    opening = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    return "".join(json.dumps(message) + "\n" for message in [*opening, *requests]).encode()


async def vanish_mid_call(
    server: StdioServerParameters, tool: str, arguments: dict[str, object], marker: str
) -> None:
    """A client that calls `tool`, waits until a process carries `marker` (its command runs),
    then goes without a word (its end of stdin closes); returns once the server has exited."""
    params = {"name": tool, "arguments": arguments}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    argv = [server.command, *server.args]
    async with await anyio.open_process(argv, cwd=server.cwd, env=server.env) as process:
        assert process.stdin is not None
        await process.stdin.send(
            raw_lines({**call, "params": {"name": tool, "arguments": arguments}})
        )
        with anyio.fail_after(60):
            while not processes_matching(marker):
                await anyio.sleep(0.1)
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()


async def cancel_once_running(call: Callable[[], Awaitable[object]], marker: str) -> None:
    """Start `call`, wait until a process carries `marker` (its command runs), then cancel it."""
    async with anyio.create_task_group() as group:
        group.start_soon(call)
        with anyio.fail_after(60):
            while not processes_matching(marker):
                await anyio.sleep(0.1)
        group.cancel_scope.cancel()


def sandboxd_mcp(socket: Path, rw: Path, ro: Path, *extra: str) -> StdioServerParameters:
    """`sandboxd mcp` over stdio as the tests launch it: `rw` read-write and `ro` read-only,
    pypi.org the one host, FIXED=launch in every command's env, at most 30 s a command, jobs
    after 2 s."""
    return stdio_server(
        "sandboxd",
        "mcp",
        "--socket",
        str(socket),
        "--allow",
        f"{rw}:rw",
        "--allow",
        f"{ro}:ro",
        "--allow-host",
        "pypi.org",
        "--env",
        "FIXED=launch",
        "--max-timeout",
        "30",
        "--background-after",
        "2",
        *extra,
    )
