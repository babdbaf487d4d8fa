"""What a `sandboxd mcp` call may ask for: the launch's limits, narrowed, never widened (pure
functions; the same refusals through a real client are in tests/security/test_mcp_attacks.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from logos.options import AllowedPath, ExecOptions
from sandboxd.mcp.limits import McpLaunch, NarrowingError, PathAsk, narrowed_options


def ask(launch: McpLaunch, **call: object) -> ExecOptions:
    arguments: dict[str, object] = {
        "paths": None,
        "hosts": None,
        "env": None,
        "workdir": None,
        "timeout_s": None,
        "background": True,
    }
    arguments.update(call)
    return narrowed_options(launch, **arguments)  # type: ignore[arg-type]


def test_without_narrowing_a_call_gets_the_launch(tmp_path: Path) -> None:
    launch = McpLaunch(
        allowed_paths=(AllowedPath(str(tmp_path), read_only=False),),
        allowed_hosts=("pypi.org",),
        env={"FIXED": "1"},
        default_timeout_s=20,
        max_timeout_s=60,
        background_after_s=5,
    )
    options = ask(launch, env={"MINE": "2"})
    assert options.allowed_paths == launch.allowed_paths
    assert options.allowed_hosts == ("pypi.org",)
    assert options.env == {"MINE": "2", "FIXED": "1"}
    assert options.timeout_s == 20 and options.inherit_env is False
    assert options.background_after_s == 5
    assert ask(launch, background=False).background_after_s is None


def test_narrowing_a_path_a_host_and_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    launch = McpLaunch(
        allowed_paths=(AllowedPath(str(tmp_path), read_only=False),),
        allowed_hosts=("pypi.org", "files.pythonhosted.org"),
    )
    options = ask(
        launch,
        paths=[PathAsk(str(tmp_path / "sub"), writable=True)],
        hosts=["PyPI.org"],
        timeout_s=3,
        workdir=str(tmp_path / "sub"),
    )
    assert options.allowed_paths == (AllowedPath(str(tmp_path / "sub"), read_only=False),)
    assert options.allowed_hosts == ("PyPI.org",)
    assert options.timeout_s == 3
    with pytest.raises(NarrowingError, match="must be an absolute path inside"):
        ask(launch, paths=[PathAsk(str(tmp_path / "sub"))], workdir=str(tmp_path))


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ({"env": {f"V{n}": "x" for n in range(65)}}, "at most 64 are taken"),
        ({"env": {"BIG": "x" * 40000}}, "longer than 32768 bytes"),
        ({"env": {"BAD=NAME": "x"}}, "cannot be passed to a process"),
        ({"timeout_s": 0}, "timeout_s 0 is not a positive number"),
        ({"timeout_s": 601}, "timeout_s 601 is above this server's limit of 600 (max_timeout in"),
        (
            {"hosts": ["pypi.org"]},
            "host pypi.org is not among this server's hosts (none; allow_host in its config file",
        ),
    ],
)
def test_what_a_call_cannot_ask_for(call: dict[str, object], expected: str) -> None:
    with pytest.raises(NarrowingError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        ask(McpLaunch(), **call)


def test_a_launch_with_the_network_on_takes_no_host_list() -> None:
    with pytest.raises(NarrowingError, match="sandboxes have the network on"):
        ask(McpLaunch(network=True), hosts=["pypi.org"])


@pytest.mark.parametrize(
    ("launch", "expected"),
    [
        ({"default_timeout_s": 700}, "longer than the maximum"),
        ({"max_timeout_s": float("inf")}, "finite number of seconds"),
        ({"max_concurrent_calls": 0}, "max_concurrent_calls >= 1"),
        ({"allowed_hosts": (" ",)}, "must be a non-empty host name"),
    ],
)
def test_a_bad_launch_is_explained(launch: dict[str, object], expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        McpLaunch(**launch)  # type: ignore[arg-type]


def test_a_launch_pins_its_paths_and_every_call_is_held_to_them(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "sub" / "to-out").symlink_to(tmp_path / "out")
    launch = McpLaunch(allowed_paths=(AllowedPath(str(tmp_path / "sub"), read_only=False),))
    real = os.stat(tmp_path / "sub")
    assert [(r.path, r.device, r.inode) for r in launch.path_ceiling] == [
        (str(tmp_path / "sub"), real.st_dev, real.st_ino)
    ]
    assert ask(launch).path_ceiling == launch.path_ceiling
    asked = ask(launch, paths=[PathAsk(str(tmp_path / "sub"), writable=True)])
    assert asked.path_ceiling == launch.path_ceiling
    out = str(tmp_path / "sub" / "to-out")
    refused = re.escape(f"refused {out} (resolves to {tmp_path / 'out'}): it is outside")
    with pytest.raises(NarrowingError, match=refused):
        ask(launch, paths=[PathAsk(out)])
    with pytest.raises(ValueError, match="cannot be pinned: it does not exist"):
        McpLaunch(allowed_paths=(AllowedPath(str(tmp_path / "missing")),))
