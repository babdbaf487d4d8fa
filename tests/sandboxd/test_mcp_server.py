"""`sandboxd mcp` over stdio, driven by the MCP SDK's own client, against a real daemon and
engine: the tools, one sandbox session per client, narrowing, jobs, fork, and bad input."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.mcp_servers import (
    cancel_once_running,
    raw_lines,
    sandboxd_mcp,
    stdio_server,
    vanish_mid_call,
)
from tests.support.processes import processes_matching
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture(scope="module")
def places() -> Iterator[tuple[Path, Path]]:
    """A read-write and a read-only host directory the launch allows."""
    root = short_dir("mcp")
    (root / "rw").mkdir()
    (root / "ro").mkdir()
    (root / "ro" / "data.txt").write_text("launch data\n")
    yield root / "rw", root / "ro"


def launch(daemon: Daemon, places: tuple[Path, Path], *extra: str) -> Any:
    return sandboxd_mcp(daemon.socket, *places, *extra)


def sessions(daemon: Daemon) -> list[str]:
    with daemon.client() as http:
        return [s["id"] for s in http.get("/v1/sessions").json()["sessions"]]


async def test_lists_its_tools_with_schemas(daemon: Daemon, places: tuple[Path, Path]) -> None:
    async with Client(launch(daemon, places)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"run", "job_status", "job_wait", "job_kill", "fork"}
    run = tools["run"]
    assert run.input_schema["required"] == ["command"]
    assert {"stdout", "exit_code", "timed_out", "truncated", "signal"} <= set(
        run.output_schema["properties"]  # type: ignore[index]
    )
    assert str(places[0]) in (run.description or "")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_run_answers_structured_and_as_text_and_keeps_one_sandbox(
    daemon: Daemon, places: tuple[Path, Path], mode: str
) -> None:
    async with Client(launch(daemon, places), mode=mode) as client:
        first = await client.call_tool(
            "run", {"command": "echo hi; echo oops >&2; echo kept > /tmp/note; exit 3"}
        )
        second = await client.call_tool("run", {"command": "cat /tmp/note; echo $FIXED"})
        opened = [s for s in sessions(daemon) if s.startswith("mcp-")]
    assert first.structured_content is not None
    out = first.structured_content
    assert (out["stdout"], out["stderr"], out["exit_code"], out["timed_out"]) == (
        "hi\n",
        "oops\n",
        3,
        False,
    )
    assert first.is_error is False
    text = first.content[0].text  # type: ignore[union-attr]
    assert text.startswith("exit code 3 in ")
    assert "--- stdout ---\nhi" in text and "--- stderr ---\noops" in text
    assert second.structured_content is not None
    assert second.structured_content["stdout"] == "kept\nlaunch\n"
    assert len(opened) == 1
    with anyio.fail_after(30):
        while opened[0] in sessions(daemon):
            await anyio.sleep(0.2)


async def test_paths_and_workdir_narrow_the_launch(
    daemon: Daemon, places: tuple[Path, Path]
) -> None:
    rw, ro = places
    (rw / "sub").mkdir(exist_ok=True)
    async with Client(launch(daemon, places)) as client:
        wrote = await client.call_tool(
            "run", {"command": "echo made > made.txt && pwd", "workdir": str(rw / "sub")}
        )
        narrowed = await client.call_tool(
            "run",
            {
                "command": f"cat {ro}/data.txt; ls {rw} 2>&1 | head -1",
                "paths": [{"path": str(ro)}],
            },
        )
    assert wrote.structured_content is not None
    assert wrote.structured_content["stdout"] == f"{rw / 'sub'}\n"
    assert (rw / "sub" / "made.txt").read_text() == "made\n"
    assert narrowed.structured_content is not None
    assert narrowed.structured_content["stdout"].startswith("launch data\n")
    assert "No such file" in narrowed.structured_content["stdout"]


async def test_bad_calls_get_clear_errors_and_the_server_goes_on(
    daemon: Daemon, places: tuple[Path, Path]
) -> None:
    async with Client(launch(daemon, places)) as client:
        answers = []
        for name, arguments in (
            ("no_such_tool", {}),
            ("run", {"command": 42}),
            ("run", {}),
            ("run", {"command": "x" * (2 * 1024 * 1024)}),
            ("run", {"command": "true", "surprise": 1}),
            ("job_wait", {"job_id": "999"}),
            ("run", {"command": "true", "sandbox": "fork-9"}),
        ):
            try:
                result = await client.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                answers.append(result.content[0].text)  # type: ignore[union-attr]
            except MCPError as exc:
                answers.append(exc.error.message)
        alive = await client.call_tool("run", {"command": "echo alive"})
    assert "no_such_tool" in answers[0]
    assert "takes no argument surprise" in answers[4]
    assert "command" in answers[1] and "command" in answers[2]
    assert "65536" in answers[3] or "at most" in answers[3]
    assert "there is no job 999" in answers[5]
    assert "there is no sandbox 'fork-9'" in answers[6]
    assert alive.structured_content is not None
    assert alive.structured_content["stdout"] == "alive\n"


async def test_a_long_command_goes_on_as_a_job(daemon: Daemon, places: tuple[Path, Path]) -> None:
    async with Client(launch(daemon, places)) as client:
        started = await client.call_tool("run", {"command": "echo begun; sleep 4; echo over"})
        assert started.structured_content is not None
        job_id = started.structured_content["job_id"]
        assert job_id is not None, started.structured_content
        assert "goes on as job" in started.content[0].text  # type: ignore[union-attr]
        listed = await client.call_tool("job_status", {})
        ended = await client.call_tool("job_wait", {"job_id": job_id, "timeout_s": 20})
        gone = await client.call_tool("job_wait", {"job_id": job_id})
    assert listed.structured_content is not None
    assert [j["job_id"] for j in listed.structured_content["jobs"]] == [job_id]
    assert ended.structured_content is not None
    assert ended.structured_content["running"] is False
    assert ended.structured_content["result"]["exit_code"] == 0
    assert "over" in ended.structured_content["result"]["stdout"]
    assert gone.is_error


async def test_fork_copies_the_sandbox(daemon: Daemon, places: tuple[Path, Path]) -> None:
    async with Client(launch(daemon, places)) as client:
        await client.call_tool("run", {"command": "echo base > /tmp/state"})
        refused = await client.call_tool("fork", {"count": 2})
        assert refused.is_error
        assert "share_writable_mounts" in refused.content[0].text  # type: ignore[union-attr]
        forked = await client.call_tool("fork", {"count": 2, "share_writable_mounts": True})
        assert forked.structured_content is not None, forked.content
        names = forked.structured_content["sandboxes"]
        assert names == ["fork-1", "fork-2"]
        await client.call_tool("run", {"command": "echo changed > /tmp/state", "sandbox": "fork-1"})
        seen = [
            (await client.call_tool("run", {"command": "cat /tmp/state", "sandbox": name}))
            for name in ("main", "fork-1", "fork-2")
        ]
        too_many = await client.call_tool("fork", {"count": 3})
    assert [s.structured_content["stdout"] for s in seen if s.structured_content] == [
        "base\n",
        "changed\n",
        "base\n",
    ]
    assert too_many.is_error


async def test_a_client_that_goes_mid_call_leaves_nothing(
    daemon: Daemon, places: tuple[Path, Path], marker: str
) -> None:
    before = set(sessions(daemon))
    async with Client(launch(daemon, places)) as client:
        call = {"command": f"sleep {marker}", "timeout_s": 30}
        await cancel_once_running(partial(client.call_tool, "run", call), f"sleep {marker}")
    with anyio.fail_after(30):
        while set(sessions(daemon)) - before or processes_matching(f"sleep {marker}"):
            await anyio.sleep(0.2)


def test_the_help_says_what_a_client_can_narrow() -> None:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "sandboxd", "mcp", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    assert "narrow them per call, never widen them" in shown


async def test_without_a_daemon_the_run_tool_says_how_to_start_one(tmp_path: Path) -> None:
    missing = tmp_path / "none.sock"
    async with Client(stdio_server("sandboxd", "mcp", "--socket", str(missing))) as client:
        result = await client.call_tool("run", {"command": "true"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"could not run: sandboxd is not running on {missing}")
    assert f"start it with `sandboxd serve --socket {missing}`" in text
    assert "pass --socket PATH (or set $SANDBOXD_SOCKET)" in text


async def test_the_launch_can_come_from_a_config_file(
    daemon: Daemon, places: tuple[Path, Path], tmp_path: Path
) -> None:
    rw, ro = places
    config = tmp_path / "mcp.toml"
    config.write_text(
        f'allow = ["{rw}:rw"]\nmax_timeout = 10\nenv = {{ FROM_FILE = "yes" }}\nmax_forks = 0\n'
    )
    server = stdio_server(
        "sandboxd", "mcp", "--socket", str(daemon.socket), "--config", str(config)
    )
    async with Client(server) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        ran = await client.call_tool("run", {"command": "echo $FROM_FILE", "workdir": str(rw)})
        too_long = await client.call_tool("run", {"command": "true", "timeout_s": 11})
        outside = await client.call_tool("run", {"command": "true", "paths": [{"path": str(ro)}]})
    assert "fork" not in names
    assert ran.structured_content is not None and ran.structured_content["stdout"] == "yes\n"
    assert too_long.is_error and outside.is_error


def test_a_bad_config_file_is_explained(tmp_path: Path) -> None:
    import subprocess
    import sys

    config = tmp_path / "mcp.toml"
    config.write_text('allow = ["/x"]\nmax_timeot = 10\n')
    done = subprocess.run(
        [sys.executable, "-m", "sandboxd", "mcp", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "max_timeot: Extra inputs are not permitted" in done.stderr
    assert "(keys: allow, allow_host" in done.stderr


async def test_malformed_json_rpc_on_stdio_is_dropped_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    """The SDK's stdio transport answers nothing to a line that is not JSON-RPC (there is no
    id to answer); what matters is that the next requests are served."""
    import json
    import sys

    garbage = b'{not json\n{"jsonrpc": "2.0", "id": "x", "method": 42}\n'
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    argv = [sys.executable, "-m", "sandboxd", "mcp", "--socket", str(tmp_path / "none.sock")]
    async with await anyio.open_process(argv) as process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(garbage + raw_lines(tools_list))
        received = b""
        with anyio.fail_after(30):
            while received.count(b"\n") < 2:
                received += await process.stdout.receive()
        process.terminate()
    answers = [json.loads(line) for line in received.decode().splitlines()]
    assert [answer.get("id") for answer in answers] == [1, 2]
    assert {tool["name"] for tool in answers[1]["result"]["tools"]} >= {"run", "fork"}


async def test_a_client_that_vanishes_mid_call_leaves_nothing(
    daemon: Daemon, places: tuple[Path, Path], marker: str
) -> None:
    """No cancellation, no goodbye: the client's end of stdin just closes."""
    before = set(sessions(daemon))
    command = {"command": f"sleep {marker}", "timeout_s": 30}
    await vanish_mid_call(launch(daemon, places), "run", command, f"sleep {marker}")
    with anyio.fail_after(30):
        while set(sessions(daemon)) - before or processes_matching(f"sleep {marker}"):
            await anyio.sleep(0.2)
