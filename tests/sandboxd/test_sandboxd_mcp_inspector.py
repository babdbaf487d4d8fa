"""`sandboxd mcp` seen by a second, independent MCP client: the MCP Inspector's CLI mode
(npm @modelcontextprotocol/inspector, installed by scripts/setup-mcp), over stdio and HTTP."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.mcp_servers import TOKEN, http_server, inspect
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = [pytest.mark.docker]


def test_the_inspector_lists_portable_tools_and_runs_a_command_over_stdio(
    daemon: Daemon,
) -> None:
    target = [sys.executable, "-m", "sandboxd", "mcp", "--socket", str(daemon.socket)]
    listed = inspect(target, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    assert names == {"run", "job_status", "job_wait", "job_kill", "fork"}
    called = inspect(
        target, "--method", "tools/call", "--tool-name", "run", "--tool-arg", "command=uname -s"
    )
    assert called.returncode == 0, called.stderr
    answer = json.loads(called.stdout)
    assert answer["structuredContent"]["stdout"] == "Linux\n"
    assert answer["content"][0]["text"].startswith("exit code 0")


def test_the_inspector_calls_over_http_with_the_token(daemon: Daemon) -> None:
    with http_server(
        "sandboxd", "mcp", "--socket", str(daemon.socket), log_dir=short_dir("mcpi")
    ) as server:
        auth = ["--header", f"Authorization: Bearer {TOKEN}"]
        called = inspect(
            [server.url, "--transport", "http", *auth],
            "--method",
            "tools/call",
            "--tool-name",
            "run",
            "--tool-arg",
            "command=echo over http",
        )
        refused = inspect(
            [server.url, "--transport", "http", "--stored-auth-only"],
            "--method",
            "tools/list",
            timeout=60,
        )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["structuredContent"]["stdout"] == "over http\n"
    assert refused.returncode != 0
    # WHY auth_required: the Inspector reads a 401 as "this server wants OAuth".
    assert "auth_required" in refused.stderr + refused.stdout
