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
from tests.support.path_swaps import SWAPPER, put_back
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
    ({"command": "true", "paths": [{"path": "/etc"}]}, "outside the paths granted to this"),
    ({"command": "true", "paths": [{"path": "/"}]}, "never widen"),
    ({"command": "true", "paths": [{"path": "{rw}/../.."}]}, "outside the paths granted to"),
    ({"command": "true", "paths": [{"path": "{ro}", "writable": True}]}, "only read-only ({ro}"),
    ({"command": "true", "hosts": ["evil.example"]}, "is not among this server's hosts"),
    ({"command": "true", "env": {"FIXED": "mine"}}, "fixed by the server's launch"),
    ({"command": "true", "env": {"HTTPS_PROXY": "http://evil:1"}}, "egress proxy"),
    ({"command": "true", "env": {"https_proxy": "http://evil:1"}}, "egress proxy"),
    ({"command": "true", "timeout_s": 3600}, "is above this server's limit of 30"),
    ({"command": "true", "workdir": "/etc"}, "must be an absolute path inside"),
    # Symlinks under an allowed path lead nowhere the launch did not allow.
    ({"command": "true", "paths": [{"path": "{rw}/to-etc"}]}, "(resolves to /etc): it is"),
    ({"command": "true", "paths": [{"path": "{rw}/to-parent"}]}, "outside the paths granted"),
    (
        {"command": "true", "paths": [{"path": "{rw}/to-ro", "writable": True}]},
        "only read-only",
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
            expected = _fill(expected, rw=str(rw), ro=str(ro))
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


SWAP_CALLS = 48
"""The other client's calls at most (on a daemon that mounts what a name leads to, the swap
wins within a few seconds)."""


async def test_a_clients_swap_never_lets_another_call_mount_what_lies_outside(
    daemon: Daemon, places: tuple[Path, Path]
) -> None:
    """One client's sandbox (read-write on rw) exchanges rw/sub with a symlink to a directory
    outside the launch, in a loop (renameat2 RENAME_EXCHANGE); another client asks for rw/sub
    read-write again and again. Each call is checked early by the server and, where it counts,
    by the daemon, against the launch's paths as pinned at launch: the outside directory is
    never mounted, and every refusal is a clear tool error."""
    rw, _ = places
    sub, link, outside = rw / "sub", rw / "swap-link", rw.parent / "outside"
    sub.mkdir()
    (sub / "which").write_text("real\n")
    outside.mkdir()
    (outside / "which").write_text("OUTSIDE\n")
    link.symlink_to(outside)
    asked = {
        # WHY the canary's two places: a sandbox mounts what a name resolves to, where it
        # resolves to.
        "command": f"cat {sub}/which; echo x > {outside}/canary 2>/dev/null; true",
        "paths": [{"path": str(sub), "writable": True}],
    }
    swap = f"nohup python3 -c '{SWAPPER}' {sub} {link} >/dev/null 2>&1 & sleep 0.5; echo started"
    answers: list[tuple[bool, str]] = []
    async with (
        Client(sandboxd_mcp(daemon.socket, *places)) as attacker,
        Client(sandboxd_mcp(daemon.socket, *places)) as victim,
    ):
        started = await attacker.call_tool("run", {"command": swap})
        assert started.structured_content is not None, started.content
        assert started.structured_content["stdout"] == "started\n", started.structured_content
        for _ in range(SWAP_CALLS):
            result = await victim.call_tool("run", asked)
            answers.append((result.is_error, result.content[0].text))  # type: ignore[union-attr]
            assert not (outside / "canary").exists(), f"escaped: {answers[-1]}"
            ran = any(not is_error for is_error, _ in answers)
            if ran and any(_DAEMON_REFUSED in text for _, text in answers):
                break
        if not any(not is_error for is_error, _ in answers):
            # Every call met the swap (a swapper with a core to itself can see to that): stop
            # it, put the names back, and the same call runs; each refusal was the swap's.
            # WHY the bracket: the pattern must not match the shell that runs pkill.
            stop = (
                "pkill -f 'RENAME_[E]XCHANGE'; "
                "while pgrep -f 'RENAME_[E]XCHANGE' >/dev/null; do sleep 0.05; done"
            )
            await attacker.call_tool("run", {"command": stop})
            put_back(sub, link)
            result = await victim.call_tool("run", asked)
            answers.append((result.is_error, result.content[0].text))  # type: ignore[union-attr]
    tally = {"ran": 0, "refused early": 0, "refused by the daemon": 0, "changed": 0}
    for is_error, text in answers:
        assert "OUTSIDE" not in text, text
        if is_error:
            tally[_refusal_kind(text)] += 1
        else:
            assert text.startswith("exit code 0") and "--- stdout ---\nreal" in text, text
            tally["ran"] += 1
    print(f"\n[sandboxd mcp, a client's swap] {len(answers)} calls: {tally}")
    assert tally["ran"] > 0, tally
    assert len(answers) > tally["ran"], f"the swap was never met: {tally}"


_DAEMON_REFUSED = "(403 path_outside_ceiling)"


def _refusal_kind(text: str) -> str:
    """Which clear refusal a tool error is (an error of any other kind fails the test)."""
    if _DAEMON_REFUSED in text:
        return "refused by the daemon"
    if "(409 path_changed)" in text or "(409 mount_changed)" in text:
        return "changed"
    assert text.startswith("Error executing tool run: refused "), text
    assert any(why in text for why in ("it is outside the paths granted", "symlink")), text
    return "refused early"
