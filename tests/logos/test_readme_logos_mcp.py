"""`logos mcp` as the README shows it: its shell line and its editor configuration, started
with an editor's environment (no XDG_RUNTIME_DIR, nothing but PATH, HOME and the provider's
variables an editor's config passes), against a scripted model and a real sandboxd started as
the README says; and a launch that cannot work stays up to tell the client why. Driven by the
MCP SDK's client and the MCP Inspector's CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.support.readme import (
    command_bin,
    editor_entry,
    editor_launch,
    inspect_entry,
    newcomer_env,
    private_default_socket,
    readme_daemon,
    readme_line,
)
from tests.support.sandboxd_harness import short_dir
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]
FIX = (
    "Fix the launch (the command, its arguments and environment in this MCP client's "
    "configuration), then restart the server."
)


def editor(prefix: str, **provider: str) -> tuple[Path, dict[str, str]]:
    """A user's home holding a project, and the environment an editor gives its servers."""
    root = short_dir(prefix)
    (root / "home" / "project").mkdir(parents=True)
    return root, newcomer_env(command_bin(root / "bin"), root / "home", **provider)


def model_env(model: ScriptedServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": model.base_url + "/v1", "OPENAI_API_KEY": "test-key"}


@pytest.mark.docker
async def test_the_readmes_logos_mcp_runs_a_task_in_the_sandbox(
    docker_client: Any, sse_server: ScriptedServer
) -> None:
    root, env = editor("rlm", **model_env(sse_server))
    home, project = Path(env["HOME"]), Path(env["HOME"]) / "project"
    (project / "notes.txt").write_text("hello from the notes\n")
    runtime = root / "run"
    runtime.mkdir(mode=0o700)
    login_shell = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    line = readme_line("`logos mcp`", "logos mcp")
    sse_server.enqueue(
        openai_stream("<cmd>cat notes.txt</cmd>"),
        openai_stream("The notes say hello."),
        openai_stream("<cmd>ls</cmd>"),
        openai_stream("There is notes.txt."),
    )
    with readme_daemon(docker_client, login_shell, root):
        shell = StdioServerParameters(
            command="bash", args=["-c", f"exec {line}"], env=env, cwd=project
        )
        async with Client(shell) as client:
            called = await client.call_tool("task", {"task": "what do the notes say?"})
        without_model = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
        inspected = inspect_entry(
            editor_entry("logos", project, "--max-steps", "5") | {"env": model_env(sse_server)},
            without_model,
            root, "--method", "tools/call", "--tool-name", "task", "--tool-arg", "task=list it",
        )  # fmt: skip
        # An editor whose configuration passes no provider: the default local model, which
        # cannot be fetched here (the tests' Hub is unreachable), and the client is told.
        unfetched = editor_launch(editor_entry("logos", project), without_model, home)
        async with Client(unfetched) as client:
            no_model = client.instructions or ""
            refused = await client.call_tool("task", {"task": "anything"})
    assert not called.is_error, called.content
    answer = called.structured_content
    assert answer is not None
    assert (answer["answer"], answer["stop_reason"]) == ("The notes say hello.", "final")
    envelope = sse_server.requests[1].json["messages"][-1]["content"]
    assert "hello from the notes" in envelope
    assert inspected.returncode == 0, inspected.stderr
    listed = json.loads(inspected.stdout)["structuredContent"]
    assert (listed["answer"], listed["stop_reason"]) == ("There is notes.txt.", "final")
    assert "notes.txt" in sse_server.requests[3].json["messages"][-1]["content"]
    assert str(home) in (listed["trajectory"] or "")
    assert no_model.startswith("logos mcp could not start: cannot reach the Hugging Face Hub")
    assert "OPENAI_API_KEY" in no_model and no_model.endswith(FIX)
    assert refused.is_error
    assert refused.content[0].text == f"Error executing tool task: {no_model}"  # type: ignore[union-attr]


async def test_without_a_daemon_the_client_is_told_why_it_cannot_work(
    sse_server: ScriptedServer,
) -> None:
    root, env = editor("rln", **model_env(sse_server))
    home = Path(env["HOME"])
    socket_path = private_default_socket(home)
    reason = (
        f"logos mcp could not start: sandboxd is not running on {socket_path} (the default "
        "socket): start it with `sandboxd serve`, or pass --socket PATH (or set "
        f"$SANDBOXD_SOCKET) to reach a daemon that listens elsewhere. {FIX}"
    )
    entry = editor_entry("logos", home / "project")
    for mode in ("legacy", "auto"):
        async with Client(editor_launch(entry, env, home), mode=mode) as client:
            instructions = client.instructions
            tools = [tool.name for tool in (await client.list_tools()).tools]
            called = await client.call_tool("task", {"task": "anything"})
        assert instructions == reason
        assert tools == ["task"]
        assert called.is_error
        assert called.content[0].text == f"Error executing tool task: {reason}"  # type: ignore[union-attr]
    inspected = inspect_entry(
        entry | {"env": model_env(sse_server)},
        {k: v for k, v in env.items() if not k.startswith("OPENAI_")},
        root, "--method", "tools/call", "--tool-name", "task", "--tool-arg", "task=anything",
    )  # fmt: skip
    assert inspected.returncode != 0
    assert json.loads(inspected.stdout)["content"][0]["text"] == (
        f"Error executing tool task: {reason}"
    )
    assert sse_server.requests == []
