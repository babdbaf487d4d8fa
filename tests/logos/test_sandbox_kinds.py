"""The registry of sandbox kinds (logos.runners.sandboxes) and the kind sandboxd registers in it,
found through the real entry points of the installed distributions."""

from __future__ import annotations

import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from logos.options import AllowedPath, ExecOptions
from logos.runners.base import Runner
from logos.runners.sandboxes import (
    ENTRY_POINT_GROUP,
    BatchSandboxKind,
    SandboxKind,
    SandboxSettings,
    batch_sandbox_kind,
    sandbox_kind,
)
from sandboxd.client.kind import SANDBOXD

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_entry_points_are_the_ones_pyproject_declares() -> None:
    # Other packages register their kinds under this name: it outlives any module move.
    assert ENTRY_POINT_GROUP == "logos.sandboxes"
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    installed = {entry.name: entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)}
    assert installed == declared[ENTRY_POINT_GROUP], (
        "the installed package metadata is stale: reinstall with pip install -e ."
    )


def test_sandboxd_is_found_by_name_and_is_a_sandbox_kind() -> None:
    kind = sandbox_kind("sandboxd")
    assert kind is SANDBOXD and isinstance(kind, SandboxKind)
    assert kind.name == "sandboxd" and kind.description and kind.platform


def test_sandboxd_is_a_kind_a_batch_can_run_in() -> None:
    assert isinstance(SANDBOXD, BatchSandboxKind)
    assert batch_sandbox_kind("sandboxd") is SANDBOXD


@pytest.mark.anyio
async def test_its_runner_is_a_logos_runner(tmp_path: Path) -> None:
    runner = SANDBOXD.open(SandboxSettings(socket=str(tmp_path / "no-daemon.sock")))
    async with runner:
        assert isinstance(runner, Runner)
        result = await runner.run("true", ExecOptions())
    assert result.error is not None and "sandboxd is not running" in result.error


def test_an_unknown_kind_is_an_error_that_lists_the_installed_ones() -> None:
    with pytest.raises(ValueError) as caught:
        sandbox_kind("no-such-sandbox")
    message = str(caught.value)
    assert "unknown sandbox kind 'no-such-sandbox'" in message
    assert f"sandboxd: {SANDBOXD.description}" in message and ENTRY_POINT_GROUP in message


def test_an_entry_point_that_is_no_kind_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real (if tiny) distribution on sys.path, registering a module's string as a kind.
    (tmp_path / "not_a_kind.py").write_text("KIND = 'a string is not a sandbox kind'\n")
    metadata = tmp_path / "not_a_kind-0.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: not-a-kind\nVersion: 0\n")
    (metadata / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbroken = not_a_kind:KIND\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ValueError, match=r"'broken' .* is not a logos\.runners\.sandboxes\.SandboxKind"
    ):
        sandbox_kind("broken")
    with pytest.raises(ValueError, match="installed ones are broken; sandboxd: "):
        sandbox_kind("no-such-sandbox")


def test_what_sandboxd_says_to_the_model_and_where_it_runs(tmp_path: Path) -> None:
    settings = SandboxSettings(
        socket=str(tmp_path / "sd.sock"),
        allowed_paths=(AllowedPath("/work", read_only=False), AllowedPath("/docs")),
    )
    assert SANDBOXD.prompt_note(settings) == (
        "Commands run in a sandbox that sees only these host paths: /work (read-write), "
        "/docs (read-only). Network access is off: do not try to download anything."
    )
    assert SANDBOXD.where(settings) == str(tmp_path / "sd.sock")
    hosts = SandboxSettings(allowed_paths=settings.allowed_paths, allowed_hosts=("pypi.org",))
    assert SANDBOXD.prompt_note(hosts).endswith(
        "Network access is off, except HTTP and HTTPS to these hosts through a proxy already "
        "set in HTTP_PROXY and HTTPS_PROXY: pypi.org; other hosts answer 403 blocked by "
        "sandbox policy."
    )


def test_sandboxd_says_what_stands_in_the_way(tmp_path: Path) -> None:
    missing = tmp_path / "no-daemon.sock"
    problem = SANDBOXD.problem(SandboxSettings(socket=str(missing)))
    assert problem is not None
    assert f"sandboxd is not running on {missing}" in problem
    assert f"`sandboxd serve --socket {missing}`" in problem
    too_long = SANDBOXD.problem(SandboxSettings(socket="/tmp/" + "s" * 200))
    assert too_long is not None and "choose a shorter path" in too_long
