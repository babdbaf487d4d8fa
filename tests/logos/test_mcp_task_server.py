"""`logos mcp` driven by the MCP SDK's own client over stdio: the `task` tool runs a logos agent
(the model a scripted real HTTP server) with real bash; progress, elicitation for approvals,
cancellation, and limits a call can only lower."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult

from tests.support.cli_harness import Home, openai_env, sent_messages
from tests.support.mcp_servers import (
    cancel_once_running,
    http_server,
    stdio_server,
    vanish_mid_call,
)
from tests.support.processes import until_gone
from tests.support.sandboxd_harness import Daemon
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def launch(home: Home, server: ScriptedServer, *extra: str) -> Any:
    return stdio_server(
        "logos",
        "mcp",
        "--model",
        "m",
        "--max-steps",
        "5",
        *extra,
        env=openai_env(home, server),
        cwd=home.work,
    )


def approving(answer: dict[str, Any] | None, asked: list[str]) -> Any:
    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        if answer is None:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=answer)

    return elicit


async def test_a_task_runs_with_progress_and_approval_through_the_client(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Looking.\n<cmd>echo from the agent</cmd>"),
        openai_stream("It printed: from the agent."),
    )
    asked: list[str] = []
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(
        launch(home, sse_server),
        mode="legacy",
        elicitation_callback=approving({"approve": True}, asked),
    ) as client:
        tools = (await client.list_tools()).tools
        result = await client.call_tool(
            "task", {"task": "say something"}, progress_callback=on_progress
        )
    assert [tool.name for tool in tools] == ["task"]
    assert "At most 5 model turns" in (tools[0].description or "")
    assert result.structured_content is not None, result.content
    out = result.structured_content
    assert out["answer"] == "It printed: from the agent."
    assert (out["stop_reason"], out["steps"], out["error"]) == ("final", 2, None)
    assert out["input_tokens"] > 0
    trajectory = Path(out["trajectory"])
    assert trajectory.exists() and trajectory.parent == home.state / "runs"
    assert "from the agent" in sent_messages(sse_server, 1)[-1]["content"]
    assert len(asked) == 1 and "echo from the agent" in asked[0]
    assert any("running echo from the agent" in line for line in progress), progress
    assert [(a["action"], a["command"]) for a in home.audit()] == [("yes", "echo from the agent")]


@pytest.mark.parametrize(
    ("mode", "answer", "expected"),
    [
        ("legacy", {"approve": False, "reason": "not on my machine"}, "not on my machine"),
        ("legacy", None, "the person chose decline"),
        ("auto", None, "the MCP client cannot ask them (no elicitation)"),
        # WHY refused: the 2026-07-28 protocol has no server-to-client request mid-call.
        ("auto", {"approve": True}, "no back-channel for server-initiated requests"),
    ],
)
async def test_a_command_the_person_refuses_or_cannot_be_asked_about_does_not_run(
    home: Home,
    sse_server: ScriptedServer,
    mode: str,
    answer: dict[str, Any] | None,
    expected: str,
) -> None:
    marker = home.work / "ran"
    sse_server.enqueue(
        openai_stream(f"<cmd>touch {marker}</cmd>"), openai_stream("It was refused.")
    )
    asked: list[str] = []
    callback = approving(answer, asked) if mode == "legacy" or answer else None
    async with Client(launch(home, sse_server), mode=mode, elicitation_callback=callback) as c:
        result = await c.call_tool("task", {"task": "touch a file"})
    assert result.structured_content is not None, result.content
    assert result.structured_content["stop_reason"] == "final"
    assert not marker.exists()
    assert expected in sent_messages(sse_server, 1)[-1]["content"]


async def test_cancelling_a_call_stops_the_run_and_kills_its_command(
    home: Home, sse_server: ScriptedServer, marker: str
) -> None:
    sse_server.enqueue(openai_stream(f"<cmd>sleep {marker}</cmd>"))
    async with Client(launch(home, sse_server, "--yes"), mode="legacy") as client:
        task = partial(client.call_tool, "task", {"task": "wait a long time"})
        await cancel_once_running(task, f"sleep {marker}")
        with anyio.fail_after(20):
            await until_gone(f"sleep {marker}")
        runs = list((home.state / "runs").glob("*.jsonl"))
        assert len(runs) == 1
        with anyio.fail_after(20):  # the run's end is written as it unwinds
            while '"stop_reason": "canceled"' not in runs[0].read_text().replace('":"', '": "'):
                await anyio.sleep(0.1)
        # the server is still there for the next call
        sse_server.enqueue(openai_stream("Fine."), openai_stream("Fine."))  # check-back asks twice
        again = await client.call_tool("task", {"task": "answer"})
    assert again.structured_content is not None
    assert again.structured_content["answer"] == "Fine.", again.structured_content


async def test_a_call_can_only_lower_the_limits(home: Home, sse_server: ScriptedServer) -> None:
    async with Client(launch(home, sse_server, "--yes", "--max-time", "60"), mode="legacy") as c:
        too_many = await c.call_tool("task", {"task": "x", "max_steps": 50})
        too_long = await c.call_tool("task", {"task": "x", "max_wall_s": 600})
        empty = await c.call_tool("task", {"task": ""})
        with pytest.raises(MCPError, match="tool task takes no argument max_step: it takes"):
            await c.call_tool("task", {"task": "x", "max_step": 3})
    assert too_many.is_error and "max_steps" in json.dumps(too_many.model_dump(mode="json"))
    assert too_long.is_error
    assert (
        "max_wall_s 600 is above this server's limit of 60 (max_time in its config file, or "
        "--max-time): a caller may narrow this server's options, never widen them"
    ) in too_long.content[0].text  # type: ignore[union-attr]
    assert empty.is_error


@pytest.mark.docker
async def test_a_task_runs_its_commands_in_the_sandbox_without_asking(
    home: Home, sse_server: ScriptedServer, daemon: Daemon
) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>echo in-sandbox > proof.txt && cat /etc/os-release | head -1</cmd>"),
        openai_stream("Written."),
    )
    server = launch(home, sse_server, "--sandbox", "--socket", str(daemon.socket))
    async with Client(server) as client:  # no elicitation: the sandbox is auto-approved
        result = await client.call_tool("task", {"task": "write a file"})
    assert result.structured_content is not None, result.content
    assert result.structured_content["stop_reason"] == "final"
    assert (home.work / "proof.txt").read_text() == "in-sandbox\n"
    assert "Debian" in sent_messages(sse_server, 1)[-1]["content"]
    assert [(a["action"], a["runner"]) for a in home.audit()] == [("auto", "sandbox")]


async def test_a_client_that_vanishes_mid_task_leaves_no_command_behind(
    home: Home, sse_server: ScriptedServer, marker: str
) -> None:
    """No cancellation, no goodbye: the client's end of stdin just closes."""
    sse_server.enqueue(openai_stream(f"<cmd>sleep {marker}</cmd>"))
    server = launch(home, sse_server, "--yes")
    await vanish_mid_call(server, "task", {"task": "wait"}, f"sleep {marker}")
    with anyio.fail_after(30):
        await until_gone(f"sleep {marker}")


async def test_over_http_a_task_needs_the_token_and_asks_through_the_session(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>echo over http</cmd>"), openai_stream("It said: over http.")
    )
    asked: list[str] = []
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with http_server(
        "logos",
        "mcp",
        "--model",
        "m",
        log_dir=home.root,
        env=openai_env(home, sse_server),
        cwd=home.work,
    ) as server:
        async with server.client(token=None) as anonymous:
            refused = await anonymous.post(server.url, json={})
        transport = streamable_http_client(server.url, http_client=server.client())
        async with Client(
            transport, mode="legacy", elicitation_callback=approving({"approve": True}, asked)
        ) as client:
            result = await client.call_tool(
                "task", {"task": "say it"}, progress_callback=on_progress
            )
    assert refused.status_code == 401
    assert "the token `logos mcp` was launched with" in refused.json()["error"]
    assert result.structured_content is not None, result.content
    assert result.structured_content["answer"] == "It said: over http."
    assert len(asked) == 1 and "echo over http" in asked[0]
    assert any("running echo over http" in line for line in progress), progress


async def test_a_run_that_cannot_be_recorded_is_a_clear_tool_error(
    home: Home, sse_server: ScriptedServer
) -> None:
    runs = home.state / "runs"
    runs.parent.mkdir(parents=True, exist_ok=True)
    runs.write_text("")  # where the trajectories go is a file, not a directory
    async with Client(launch(home, sse_server, "--yes")) as client:
        result = await client.call_tool("task", {"task": "anything"})
        sse_server.enqueue(openai_stream("Fine."), openai_stream("Fine."))
        runs.unlink()
        again = await client.call_tool("task", {"task": "answer"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert f"cannot write {runs}/" in text and "check its permissions" in text, text
    assert again.structured_content is not None and again.structured_content["answer"] == "Fine."
