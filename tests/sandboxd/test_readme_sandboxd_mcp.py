"""`sandboxd mcp` as the README configures it in an editor: the editor starts it with an
environment of its own (no XDG_RUNTIME_DIR, nothing but PATH and HOME), and it must find the
daemon a login shell started, or say where it looked and what to do; a launch that is wrong
stays up long enough for the client to read why. Driven by the MCP SDK's client and the MCP
Inspector's CLI, reading the README's own configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.support.readme import (
    command_bin,
    editor_entry,
    editor_launch,
    inspect_entry,
    newcomer_env,
    private_default_socket,
    readme_daemon,
)
from tests.support.sandboxd_harness import short_dir

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


def editor(prefix: str) -> tuple[Path, dict[str, str]]:
    """A user's home holding a project, and the environment an editor gives its servers."""
    root = short_dir(prefix)
    (root / "home" / "project").mkdir(parents=True)
    return root, newcomer_env(command_bin(root / "bin"), root / "home")


def text_of(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.docker
async def test_the_editor_finds_the_daemon_a_login_shell_started(docker_client: Any) -> None:
    root, env = editor("rdm")
    home = Path(env["HOME"])
    runtime = root / "run"
    runtime.mkdir(mode=0o700)
    login_shell = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    entry = editor_entry("sandboxd", home / "project")
    with readme_daemon(docker_client, login_shell, root):
        async with Client(editor_launch(entry, env, home)) as client:
            made = await client.call_tool("run", {"command": "pwd; echo made > made.txt"})
        inspected = inspect_entry(
            entry, env, root, "--method", "tools/call", "--tool-name", "run",
            "--tool-arg", "command=cat made.txt",
        )  # fmt: skip
    assert not made.is_error, text_of(made)
    assert made.structured_content is not None
    assert made.structured_content["stdout"] == f"{home / 'project'}\n"
    assert (home / "project" / "made.txt").read_text() == "made\n"
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["structuredContent"]["stdout"] == "made\n"


async def test_without_a_daemon_the_editor_is_told_where_it_looked_and_what_to_do() -> None:
    _, env = editor("rdn")
    home = Path(env["HOME"])
    socket_path = private_default_socket(home)
    entry = editor_entry("sandboxd", home / "project")
    async with Client(editor_launch(entry, env, home)) as client:
        result = await client.call_tool("run", {"command": "true"})
    assert result.is_error
    assert text_of(result) == (
        f"could not run: sandboxd is not running on {socket_path} (the default socket): start "
        "it with `sandboxd serve`, or pass --socket PATH (or set $SANDBOXD_SOCKET) to reach a "
        "daemon that listens elsewhere"
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_wrong_launch_stays_up_to_say_why(mode: str) -> None:
    root, env = editor("rdw")
    home = Path(env["HOME"])
    missing = home / "sandboxd-mcp.toml"
    entry = editor_entry("sandboxd", home / "project", "--config", str(missing))
    reason = (
        f"sandboxd mcp could not start: cannot read {missing}: No such file or directory. Fix "
        "the launch (the command, its arguments and environment in this MCP client's "
        "configuration), then restart the server."
    )
    async with Client(editor_launch(entry, env, home), mode=mode) as client:
        instructions = client.instructions
        tools = [tool.name for tool in (await client.list_tools()).tools]
        called = await client.call_tool("run", {"command": "true"})
    assert instructions == reason
    assert tools == ["run", "job_status", "job_wait", "job_kill", "fork"]
    assert called.is_error and text_of(called) == f"Error executing tool run: {reason}"
    inspected = inspect_entry(
        entry, env, root, "--method", "tools/call", "--tool-name", "run",
        "--tool-arg", "command=true",
    )  # fmt: skip
    assert inspected.returncode != 0
    assert json.loads(inspected.stdout)["content"][0]["text"] == (
        f"Error executing tool run: {reason}"
    )
    assert f"sandboxd mcp: cannot read {missing}" in inspected.stderr
