"""A file a docs page shows (a block with `title="PATH"`), checked as what reads it: logos's
and sandboxd's config files and approval rules by their own loaders, a batch's task file by
the batch's reader, and an editor's MCP configuration launched server by server the way
that editor launches them (its command and arguments, in the page's environment), through
a real MCP client. Other files (a script, a message) are only written: the commands after
them use them."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from logos.approvals.rules import load_rules
from logos.batch.tasks import read_task_file
from logos.settings.config_file import load_config_file
from sandboxd.server.config import load_config
from tests.support.docs_pages import Block
from tests.support.docs_session import PageRun

EDITOR_PROJECT = "/home/me/project"
"""The project directory the docs' editor configurations name: the page's own, when run."""
MCP_CONFIGS = (".mcp.json", "mcp.json", ".codex/config.toml")
LAUNCH_TIMEOUT_S = 60.0


def check_file(run: PageRun, block: Block, path: Path) -> None:
    """Raise AssertionError naming the block when the file is not what its reader takes."""
    name = str(block.title)
    try:
        if name.endswith(MCP_CONFIGS):
            anyio.run(_launch_each_server, run, block, path)
        elif name.endswith("logos/config.toml"):
            load_config_file(path, run.env)
        elif name.endswith("sandboxd/config.toml"):
            load_config(path)
        elif name.endswith(".toml") and "rules" in path.name:
            load_rules(path)
        elif name.endswith(".jsonl"):
            problems = read_task_file(path).problems
            assert not problems, problems
        elif name.endswith(".toml"):
            raise AssertionError(f"nothing in logos or sandboxd reads {name}")
    except AssertionError as exc:
        raise AssertionError(f"{block.where}: {name}: {exc}") from exc
    except Exception as exc:
        raise AssertionError(f"{block.where}: {name}: {type(exc).__name__}: {exc}") from exc


def mcp_servers(path: Path) -> dict[str, dict[str, Any]]:
    """The servers an MCP client's configuration names: Cursor's and Claude Code's
    `mcpServers`, VS Code's `servers`, Codex's `mcp_servers`."""
    text = path.read_text(encoding="utf-8")
    parsed = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    for key in ("mcpServers", "servers", "mcp_servers"):
        if isinstance(parsed.get(key), dict):
            servers: dict[str, dict[str, Any]] = parsed[key]
            return servers
    raise AssertionError("no mcpServers, servers or mcp_servers table")


def _as_launched(value: str, run: PageRun) -> str:
    """An argument as the editor passes it: VS Code's `${workspaceFolder}` filled in, the
    docs' example project made the page's own."""
    return value.replace("${workspaceFolder}", str(run.work)).replace(EDITOR_PROJECT, str(run.work))


async def _launch_each_server(run: PageRun, block: Block, path: Path) -> None:
    servers = mcp_servers(path)
    assert servers, "it names no server"
    for name, server in servers.items():
        if "url" in server:
            _check_http_entry(run, block, name, server)
            continue
        assert server.get("type", "stdio") == "stdio", f"{name}: an unknown type"
        launch = StdioServerParameters(
            command=server["command"],
            args=[_as_launched(arg, run) for arg in server.get("args", [])],
            env={**run.env, **server.get("env", {})},
            cwd=run.work,
        )
        with anyio.fail_after(LAUNCH_TIMEOUT_S):
            async with Client(launch) as client:
                failed = client.instructions or ""
                tools = [tool.name for tool in (await client.list_tools()).tools]
        assert "could not start" not in failed, f"{name}: {failed}"
        assert tools, f"{name} serves no tool"


def _check_http_entry(run: PageRun, block: Block, name: str, server: dict[str, Any]) -> None:
    """An HTTP entry names a server the page starts: its address is that of a `--http` line
    of the page, with the path the MCP servers serve, and a bearer token header."""
    url = re.fullmatch(r"http://(127\.0\.0\.1:\d+)/mcp", server["url"])
    assert url is not None, f"{name}: {server['url']} is not a loopback MCP address"
    page = run.page.read_text(encoding="utf-8")
    assert f"--http {url.group(1)}" in page, f"{name}: the page starts no server on {url.group(1)}"
    authorization = server.get("headers", {}).get("Authorization", "")
    assert authorization.startswith("Bearer "), f"{name}: no bearer token"
