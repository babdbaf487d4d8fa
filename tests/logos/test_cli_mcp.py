"""`logos --mcp`: the command gives a run an MCP server's tools; the model (a scripted real
HTTP server) calls one, and the approval and the audit log record it like a command."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.cli_harness import REPO, Home, logos, openai_env, sent_messages
from tests.support.sse_server import ScriptedServer, openai_stream

NOTES = f"notes={sys.executable} -m tests.support.notes_mcp_server"


@pytest.mark.timeout(90)
def test_a_run_calls_an_mcp_tool_given_with_mcp(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        openai_stream('<cmd>mcp notes shout {"text": "hi", "times": 2}</cmd>'),
        openai_stream("It shouted."),
    )
    done = logos(
        ["--model", "m", "--yes", "--mcp", NOTES, "shout hi"],
        home,
        {**openai_env(home, sse_server), "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert '`mcp notes shout {"text": string, "times"?: integer}`' in system
    envelope = sent_messages(sse_server, 1)[-1]["content"]
    assert "HI HI" in envelope
    audit = home.audit()
    assert [(a["action"], a["command"]) for a in audit] == [
        ("auto", 'mcp notes shout {"text": "hi", "times": 2}')
    ]


def test_a_bad_mcp_option_is_explained(home: Home) -> None:
    done = logos(["--model", "m", "--mcp", "nonsense", "task"], home, {})
    assert done.returncode == 2
    assert "--mcp 'nonsense': give a config file" in done.stderr
    config = home.root / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"a": {"command": "x", "url": "http://y"}}}))
    done = logos(["--model", "m", "--mcp", str(config), "task"], home, {})
    assert done.returncode == 2
    assert "give either a command (stdio) or a url (HTTP)" in done.stderr


@pytest.mark.timeout(90)
def test_the_config_file_gives_every_run_its_mcp_servers(
    home: Home, sse_server: ScriptedServer
) -> None:
    servers = home.root / "servers.json"
    servers.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {
                        "command": sys.executable,
                        "args": ["-m", "tests.support.notes_mcp_server"],
                        "cwd": str(REPO),
                    }
                }
            }
        )
    )
    home.config_file.parent.mkdir(parents=True, exist_ok=True)
    home.config_file.write_text(f"mcp = [{json.dumps(str(servers))}]\n")
    sse_server.enqueue(
        openai_stream('<cmd>mcp notes add {"a": 1, "b": 2}</cmd>'), openai_stream("Three.")
    )
    done = logos(["--model", "m", "--yes", "add"], home, openai_env(home, sse_server))
    assert done.returncode == 0, done.stderr
    assert "<stdout>\n3\n</stdout>" in sent_messages(sse_server, 1)[-1]["content"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--http", "0.0.0.0:8766"], "logos mcp listens on loopback only"),
        (["--http", "127.0.0.1:8766"], "needs a bearer token: set $LOGOS_MCP_TOKEN"),
        (["--http", "8766"], "write HOST:PORT"),
    ],
)
def test_logos_mcp_http_mistakes_are_explained(home: Home, argv: list[str], expected: str) -> None:
    done = logos(["mcp", "--model", "m", *argv], home, {})
    assert done.returncode == 2
    assert expected in done.stderr
