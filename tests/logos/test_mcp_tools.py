"""MCP servers' tools inside a logos run: a scripted model calls the tools of a real MCP server
(tests/support/notes_mcp_server.py, written with the SDK) through `mcp SERVER TOOL {...}`
blocks, with real bash beside them; schema checks, bounds, approval and audit, and servers
that crash, hang or never start."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logos import Config, ExecOptions, LocalRunner, run
from logos.approvals.approval import ApprovalDecision, ApprovalRunner, AutoApprover
from logos.mcp.servers import McpConfigError, McpServer, load_mcp_config, parse_mcp_option
from tests.support.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
NOTES = McpServer(
    name="notes", command=(sys.executable, "-m", "tests.support.notes_mcp_server"), cwd=str(REPO)
)


def config(provider: ScriptedProvider, *servers: McpServer, **options: float) -> Config:
    return Config(
        provider=provider,
        runner=ApprovalRunner(LocalRunner(), AutoApprover()),
        exec_options=ExecOptions(
            timeout_s=options.get("timeout_s", 30.0),
            max_output_bytes=int(options.get("max_output_bytes", 4096)),
        ),
        mcp_servers=servers or (NOTES,),
    )


def envelope(provider: ScriptedProvider, request: int) -> str:
    return provider.requests[request].messages[-1].content


async def test_a_run_calls_a_tool_of_a_real_mcp_server() -> None:
    provider = ScriptedProvider.saying(
        'Adding.\n<cmd>mcp notes add {"a": 2, "b": 40}</cmd>\n<cmd>echo bash too</cmd>',
        "The sum is 42.",
    )
    result = await run(config(provider), [], "add 2 and 40")
    assert result.stop_reason == "final"
    system = provider.requests[0].system
    assert '`mcp notes add {"a": integer, "b": integer}`: Add two integers' in system
    assert '`mcp notes shout {"text": string, "times"?: integer}`' in system
    shown = envelope(provider, 1)
    assert "42" in shown and "bash too" in shown


async def test_arguments_that_do_not_fit_get_a_correction_not_a_call() -> None:
    provider = ScriptedProvider.saying(
        '<cmd>mcp notes add {"a": "two", "b": 40}</cmd>\n'
        "<cmd>mcp notes add {a: 2}</cmd>\n"
        '<cmd>mcp notes add {"a": 2}</cmd>\n'
        "<cmd>mcp notes subtract {}</cmd>\n"
        "<cmd>mcp notes</cmd>",
        "Done.",
    )
    result = await run(config(provider), [], "go")
    assert result.stop_reason == "final"
    shown = envelope(provider, 1)
    assert "'two' is not of type 'integer'" in shown
    assert "must be one JSON object" in shown
    assert "'b' is a required property" in shown
    assert '`mcp notes add {"a": integer, "b": integer}`' in shown
    assert "has no tool 'subtract'; its tools: add, shout, big, refuse, nap, crash" in shown
    assert "add: Add two integers" in shown  # `mcp notes` lists the tools in full


async def test_results_are_bounded_and_tool_errors_reach_the_model() -> None:
    provider = ScriptedProvider.saying(
        '<cmd>mcp notes big {"size": 50000}</cmd>\n<cmd>mcp notes refuse {"reason": "no"}</cmd>',
        "Done.",
    )
    result = await run(config(provider, max_output_bytes=1024), [], "go")
    assert result.stop_reason == "final"
    shown = envelope(provider, 1)
    assert "xxxx" in shown and len(shown) < 6000
    assert "omitted" in shown or "bytes" in shown
    assert "refused: no" in shown


async def test_a_server_that_crashes_or_hangs_does_not_end_the_run() -> None:
    provider = ScriptedProvider.saying(
        '<cmd>mcp notes nap {"seconds": 20}</cmd>',
        "<cmd>mcp notes crash</cmd>",
        '<cmd>mcp notes add {"a": 1, "b": 1}</cmd>\n<cmd>echo still here</cmd>',
        "The server is gone.",
    )
    result = await run(config(provider, timeout_s=2), [], "go")
    assert result.stop_reason == "final"
    assert "did not answer nap within 2 s" in envelope(provider, 1)
    crashed = envelope(provider, 2)
    assert "MCP server notes" in crashed
    after = envelope(provider, 3)
    assert "MCP server notes is not available" in after
    assert "crashing on purpose" in after  # the end of its stderr says why
    assert "still here" in after


async def test_a_server_that_does_not_start_is_named_in_the_prompt() -> None:
    broken = McpServer(name="broken", command=(sys.executable, "-c", "import sys; sys.exit(2)"))
    provider = ScriptedProvider.saying("<cmd>mcp broken anything {}</cmd>", "It is broken.")
    result = await run(config(provider, NOTES, broken), [], "go")
    assert result.stop_reason == "final"
    system = provider.requests[0].system
    assert "MCP server `broken` is not available" in system
    assert "`mcp notes add" in system
    assert "MCP server broken is not available" in envelope(provider, 1)


async def test_mcp_calls_go_through_approval_and_are_recorded() -> None:
    decided: list[ApprovalDecision] = []

    class Refusing:
        async def decide(self, command: str) -> ApprovalDecision:
            return ApprovalDecision(action="no", command=command, reason="not today")

    provider = ScriptedProvider.saying('<cmd>mcp notes add {"a": 1, "b": 2}</cmd>', "Refused.")
    base = config(provider)
    gated = ApprovalRunner(LocalRunner(), Refusing(), decided.append)
    result = await run(dataclasses.replace(base, runner=gated), [], "go")
    assert result.stop_reason == "final"
    assert [d.command for d in decided] == ['mcp notes add {"a": 1, "b": 2}']
    assert "not today" in envelope(provider, 1)


def test_config_files_and_options(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        '{"mcpServers": {"notes": {"command": "python3", "args": ["-m", "x"], "env": {"A": "1"}},'
        ' "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}}}}'
    )
    notes, web = load_mcp_config(path)
    assert notes.command == ("python3", "-m", "x") and notes.env == {"A": "1"}
    assert web.url == "http://127.0.0.1:9/mcp" and web.headers["Authorization"] == "Bearer t"
    assert parse_mcp_option(str(path)) == [notes, web]
    assert parse_mcp_option("fs=npx -y server-fs /tmp")[0].command == (
        "npx",
        "-y",
        "server-fs",
        "/tmp",
    )
    assert parse_mcp_option("web=http://127.0.0.1:9/mcp")[0].url == "http://127.0.0.1:9/mcp"
    for bad, expected in (
        ("nonsense", "give a config file"),
        ("bad name=x", "give a config file"),
    ):
        with pytest.raises(McpConfigError, match=expected):
            parse_mcp_option(bad)
    path.write_text('{"servers": {}}')
    with pytest.raises(McpConfigError, match="mcpServers"):
        load_mcp_config(path)
    path.write_text('{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}')
    with pytest.raises(McpConfigError, match="either a command"):
        load_mcp_config(path)


def test_an_approval_rule_can_name_an_mcp_tool() -> None:
    from logos.approvals.rules import parse_rules

    rules = parse_rules(
        {
            "rule": [
                {
                    "name": "no crash",
                    "verdict": "deny",
                    "program": "mcp",
                    "args": ["notes", "crash", "**"],
                    "match": ["mcp notes crash"],
                    "no_match": ['mcp notes add {"a": 1, "b": 2}'],
                    "reason": "the notes server must stay up",
                }
            ]
        },
        "test rules",
    )
    assert rules.verdict("mcp notes crash", "auto").verdict == "deny"
    assert rules.verdict('mcp notes add {"a": 1, "b": 2}', "auto").verdict == "auto"


@pytest.fixture
def notes_over_http() -> Iterator[str]:
    """The notes server over streamable HTTP on a free loopback port: its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = subprocess.Popen(
        [sys.executable, "-m", "tests.support.notes_mcp_server", "--http", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while served.poll() is None and time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        served.terminate()
        served.wait(timeout=30)


async def test_a_server_over_http_and_one_that_hangs_at_start(notes_over_http: str) -> None:
    web = McpServer(name="web", url=notes_over_http, start_timeout_s=30)
    stuck = McpServer(
        name="stuck",
        command=(sys.executable, "-c", "import time; time.sleep(60)"),
        start_timeout_s=1,
    )
    huge = "y" * 70000
    provider = ScriptedProvider.saying(
        '<cmd>mcp web add {"a": 20, "b": 22}</cmd>\n'
        f'<cmd>mcp web shout {{"text": "{huge}"}}</cmd>',
        "Done.",
    )
    result = await run(config(provider, web, stuck), [], "go")
    assert result.stop_reason == "final"
    assert (
        "MCP server `stuck` is not available: it did not start and list its tools within 1 s"
        in provider.requests[0].system
    )
    shown = envelope(provider, 1)
    assert "42" in shown
    assert "more than 65536: write large data to a file" in shown


async def test_a_server_with_many_tools_lists_the_first_in_the_prompt() -> None:
    from mcp_types import Tool

    from logos.mcp.tools import MAX_TOOLS_LISTED, McpTools, _Connection

    connection = _Connection(McpServer(name="big", command=("x",)))
    connection.tools = {
        f"t{n}": Tool(name=f"t{n}", description=f"tool {n}", input_schema={"type": "object"})
        for n in range(MAX_TOOLS_LISTED + 5)
    }
    usage = McpTools([connection]).usage
    assert usage[1] == "`mcp big t0 {}`: tool 0"
    assert usage[-1] == "… and 5 more tools of `big`: `mcp big` lists them all"
    assert len(usage) == MAX_TOOLS_LISTED + 2
