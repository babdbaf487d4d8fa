"""Family: one command's round trip through `sandboxd mcp`, over stdio and over streamable
HTTP, beside the native API (`SandboxRunner`), the same command in warm sessions of one daemon.

Each MCP method is the SDK's own client (`mcp.Client`) calling the `run` tool of a `sandboxd
mcp` process that the benchmark launches as an editor would: over stdio, and over HTTP on
loopback with a bearer token (the session protocol, so that its sandbox stays warm). Samples
are interleaved, their order rotating each round, after one unmeasured round.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

import httpx2

from bench.daemon import BenchSetupError, check_image, running_daemon
from bench.plan import Plan
from bench.processes import stop_process
from bench.results import Section, Series, SeriesGroup, ratio, series_row
from bench.roundtrip import CommandFailed, sample_rotating
from logos.options import ExecOptions
from sandboxd.client.runner import SandboxRunner

if TYPE_CHECKING:  # WHY: the SDK takes half a second to import, and only this family needs it
    from mcp import Client

FAMILY = "mcp"
TITLE = "Command round trip through MCP (sandboxd mcp) beside the native API"
COMMAND = "true"
NATIVE = "SandboxRunner (native API), warm session"
MCP_STDIO = "MCP run tool over stdio (mcp.Client)"
MCP_HTTP = "MCP run tool over streamable HTTP (mcp.Client)"
_START_TIMEOUT_S = 60.0
_REPO = Path(__file__).resolve().parent.parent


async def run(plan: Plan) -> Section:
    check_image(plan.image)
    samples: dict[str, list[float]] = {NATIVE: [], MCP_STDIO: [], MCP_HTTP: []}
    failures: list[str] = []
    with running_daemon(plan.image) as daemon, _http_server(daemon.socket) as (url, token):
        async with AsyncExitStack() as stack:
            native = SandboxRunner(daemon.socket, session=f"bench-mcp-{uuid.uuid4().hex[:8]}")
            stack.push_async_callback(native.aclose)
            stdio = await stack.enter_async_context(_stdio_client(daemon.socket))
            http = await stack.enter_async_context(_http_client(url, token))
            samplers = {
                NATIVE: lambda: _native_once(native),
                MCP_STDIO: lambda: _mcp_once(stdio),
                MCP_HTTP: lambda: _mcp_once(http),
            }
            await sample_rotating(samplers, plan.roundtrip_iterations, samples, failures)
    return _section(plan, samples, failures)


async def _native_once(runner: SandboxRunner) -> float:
    started = time.perf_counter()
    result = await runner.run(COMMAND, ExecOptions())
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise CommandFailed(f"exit {result.exit_code}, error {result.error!r}")
    return elapsed


async def _mcp_once(client: Client) -> float:
    started = time.perf_counter()
    result = await client.call_tool("run", {"command": COMMAND})
    elapsed = time.perf_counter() - started
    out = result.structured_content or {}
    if result.is_error or out.get("exit_code") != 0:
        raise CommandFailed(f"the run tool answered {result.content!r}")
    return elapsed


@asynccontextmanager
async def _stdio_client(socket: Path) -> AsyncIterator[Client]:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sandboxd", "mcp", "--socket", str(socket)],
        env=dict(os.environ),
        cwd=_REPO,
    )
    async with Client(server) as client:
        yield client


@asynccontextmanager
async def _http_client(url: str, token: str) -> AsyncIterator[Client]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        yield client


@contextmanager
def _http_server(socket: Path) -> Iterator[tuple[str, str]]:
    """`sandboxd mcp --http 127.0.0.1:0` with a fresh token: its URL and the token."""
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "sandboxd", "mcp", "--socket", str(socket)),
                *("--http", "127.0.0.1:0"),
            ],
            cwd=_REPO,
            env={**os.environ, "SANDBOXD_MCP_TOKEN": token},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield _served_url(proc, lambda: _read(log)), token
        finally:
            stop_process(proc)


def _read(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")


def _served_url(proc: subprocess.Popen[bytes], output: Callable[[], str]) -> str:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.search(r"serving on (http://\S+)", output())
        if found:
            return found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise BenchSetupError(f"sandboxd mcp --http did not start: {output()[-500:]}")


def _section(plan: Plan, samples: dict[str, list[float]], failures: list[str]) -> Section:
    series = {label: Series(label, tuple(values)) for label, values in samples.items()}
    native = series[NATIVE].median_s
    figure = f"round trip `{COMMAND}`"
    rows = tuple(
        series_row(figure, series[label], ratio(series[label].median_s, native))
        for label in (NATIVE, MCP_STDIO, MCP_HTTP)
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=("figure", "method", "n", "median", "p95", "vs native"),
        rows=rows,
        groups=(SeriesGroup(f"Round trip through MCP: `{COMMAND}`", tuple(series.values())),),
        notes=(
            f"{plan.roundtrip_iterations} interleaved samples per method after one unmeasured "
            "round, the order rotating each round; each method keeps one warm sandbox session "
            "of the same daemon; the MCP figures include the SDK client, the JSON-RPC framing, "
            "the server's argument checks and its own call to the daemon",
        ),
        problems=tuple(failures[:3]),
    )
