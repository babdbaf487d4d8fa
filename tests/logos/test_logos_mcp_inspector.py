"""`logos mcp` seen by a second, independent MCP client: the MCP Inspector's CLI mode (npm
@modelcontextprotocol/inspector, installed by scripts/setup-mcp) lists and calls its tool."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.cli_harness import Home, openai_env
from tests.support.mcp_servers import inspect
from tests.support.sse_server import ScriptedServer, openai_stream


@pytest.mark.timeout(180)
def test_the_inspector_lists_and_calls_the_task_tool(
    home: Home, sse_server: ScriptedServer
) -> None:
    env = openai_env(home, sse_server)
    passed = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "HOME", "XDG_STATE_HOME", "PYTHONPATH")
    target = [
        *(word for key in passed for word in ("-e", f"{key}={env[key]}")),
        "--cwd",
        str(home.work),
        sys.executable,
        "-m",
        "logos",
        "mcp",
        "--model",
        "m",
        "--yes",
    ]
    listed = inspect(target, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stderr
    assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]] == ["task"]
    sse_server.enqueue(openai_stream("<cmd>echo inspected</cmd>"), openai_stream("It said so."))
    called = inspect(
        target, "--method", "tools/call", "--tool-name", "task", "--tool-arg", "task=say it"
    )
    assert called.returncode == 0, called.stderr
    answer = json.loads(called.stdout)["structuredContent"]
    assert (answer["answer"], answer["stop_reason"], answer["steps"]) == ("It said so.", "final", 2)
