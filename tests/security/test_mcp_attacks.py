"""Attacks on `sandboxd mcp` through the MCP SDK's own client, against a real daemon and
engine: a client widening what the launch allowed (paths, through `..` and symlinks too;
hosts; env; timeouts; workdir), and a flood of calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support.mcp_servers import sandboxd_mcp
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture(scope="module")
def places() -> Iterator[tuple[Path, Path]]:
    """A read-write and a read-only host directory the launch allows; the read-write one
    holds symlinks out: to /etc, to the read-only one, and to its parent."""
    root = short_dir("mcpa")
    rw, ro = root / "rw", root / "ro"
    rw.mkdir()
    ro.mkdir()
    (rw / "to-etc").symlink_to("/etc")
    (rw / "to-ro").symlink_to(ro)
    (rw / "to-parent").symlink_to(root)
    yield rw, ro


WIDENINGS = [
    ({"command": "true", "paths": [{"path": "/etc"}]}, "not one the server was launched with"),
    ({"command": "true", "paths": [{"path": "/"}]}, "never widen"),
    ({"command": "true", "paths": [{"path": "{rw}/../.."}]}, "not one the server was launched"),
    ({"command": "true", "paths": [{"path": "{ro}", "writable": True}]}, "cannot make it writable"),
    ({"command": "true", "hosts": ["evil.example"]}, "was not allowed when the server"),
    ({"command": "true", "env": {"FIXED": "mine"}}, "fixed by the server's launch"),
    ({"command": "true", "env": {"HTTPS_PROXY": "http://evil:1"}}, "egress proxy"),
    ({"command": "true", "env": {"https_proxy": "http://evil:1"}}, "egress proxy"),
    ({"command": "true", "timeout_s": 3600}, "at most 30 s per command"),
    ({"command": "true", "workdir": "/etc"}, "must be an absolute path inside"),
    # Symlinks under an allowed path lead nowhere the launch did not allow.
    ({"command": "true", "paths": [{"path": "{rw}/to-etc"}]}, "not one the server was launched"),
    ({"command": "true", "paths": [{"path": "{rw}/to-parent"}]}, "not one the server was"),
    (
        {"command": "true", "paths": [{"path": "{rw}/to-ro", "writable": True}]},
        "cannot make it writable",
    ),
    ({"command": "true", "workdir": "{rw}/to-etc"}, "must be an absolute path inside"),
    ({"command": "true", "paths": [{"path": "relative/path"}]}, "must be an absolute host path"),
]


async def test_a_client_cannot_widen_the_launch(daemon: Daemon, places: tuple[Path, Path]) -> None:
    rw, ro = places
    async with Client(sandboxd_mcp(daemon.socket, *places)) as client:
        for arguments, expected in WIDENINGS:
            filled = _fill(arguments, rw=str(rw), ro=str(ro))
            result = await client.call_tool("run", filled)
            assert result.is_error, filled
            assert expected in result.content[0].text, (filled, result.content)  # type: ignore[union-attr]
        still = await client.call_tool("run", {"command": "echo fine"})
    assert still.structured_content is not None
    assert still.structured_content["stdout"] == "fine\n"


def _fill(value: Any, **names: str) -> Any:
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [_fill(item, **names) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, **names) for key, item in value.items()}
    return value


async def test_a_flood_of_calls_is_answered(daemon: Daemon, places: tuple[Path, Path]) -> None:
    answers: list[str] = []
    async with Client(sandboxd_mcp(daemon.socket, *places)) as client:

        async def one(index: int) -> None:
            result = await client.call_tool("run", {"command": f"echo {index}"})
            assert result.structured_content is not None
            answers.append(result.structured_content["stdout"])

        with anyio.fail_after(90):
            async with anyio.create_task_group() as group:
                for index in range(40):
                    group.start_soon(one, index)
    assert sorted(answers) == sorted(f"{i}\n" for i in range(40))


async def test_a_path_narrowed_through_a_symlink_mounts_its_target_read_only(
    daemon: Daemon, places: tuple[Path, Path]
) -> None:
    """`rw/to-ro` names the read-only path: asked for without writable, it is mounted as the
    path it resolves to, read-only, and a write there fails."""
    rw, ro = places
    async with Client(sandboxd_mcp(daemon.socket, *places)) as client:
        result = await client.call_tool(
            "run",
            {"command": f"touch {ro}/planted", "paths": [{"path": str(rw / "to-ro")}]},
        )
    assert result.structured_content is not None, result.content
    assert result.structured_content["exit_code"] != 0
    assert "Read-only file system" in result.structured_content["stderr"]
    assert not (ro / "planted").exists()
