"""temenos as a sandbox kind: found by name through the real entry points, what it tells the
model, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos.options import AllowedPath, ExecOptions
from logos.runners.base import Runner
from logos.runners.sandboxes import (
    BatchSandboxKind,
    SandboxKind,
    SandboxSettings,
    batch_sandbox_kind,
    sandbox_kind,
)
from logos.temenos.kind import TEMENOS
from logos.temenos.runner import TemenosRunner
from tests.support.temenos_server import temenos_server


def test_temenos_is_found_by_name_and_is_a_sandbox_kind() -> None:
    kind = sandbox_kind("temenos")
    assert kind is TEMENOS and isinstance(kind, SandboxKind)
    assert kind.description and "temenos" in kind.platform


def test_a_batch_refuses_temenos_and_says_why() -> None:
    # WHY: temenos's API says nothing of a per-caller session cap or a full daemon, and a
    # node cannot start one on demand; a batch needs all three.
    assert not isinstance(TEMENOS, BatchSandboxKind)
    with pytest.raises(ValueError) as caught:
        batch_sandbox_kind("temenos")
    message = str(caught.value)
    assert "a batch cannot run in the sandbox kind 'temenos'" in message
    assert "BatchSandboxKind" in message and "sandboxd" in message


def test_what_temenos_says_to_the_model() -> None:
    paths = (AllowedPath("/work", read_only=False), AllowedPath("/docs"))
    assert TEMENOS.prompt_note(SandboxSettings(allowed_paths=paths)) == (
        "Commands run in a temenos sandbox that sees only these host paths: /work "
        "(read-write), /docs (read-only). Network access was not asked for: assume there is "
        "none, and do not try to download anything."
    )
    asked = TEMENOS.prompt_note(SandboxSettings(allowed_paths=paths, network=True))
    assert "Network access was asked for (the daemon's configuration has the last word)." in asked


@pytest.mark.anyio
async def test_its_runner_is_a_logos_runner_with_the_settings(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0k3n")
    with temenos_server() as server:
        settings = SandboxSettings(
            socket=server.address, network=True, session="agent-7", auth_token_file=str(token)
        )
        runner = TEMENOS.open(settings)
        async with runner:
            assert isinstance(runner, Runner) and isinstance(runner, TemenosRunner)
            assert TEMENOS.problem(settings) is None
            await runner.run("true", ExecOptions())
        body = server.run_bodies()[0]
    assert (body["network"], body["caller_id"], body["auth_token"]) == (True, "agent-7", "t0k3n")
    assert TEMENOS.where(settings) == f"http://{server.address}"


def test_what_temenos_cannot_do_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="leave out --image"):
        TEMENOS.open(SandboxSettings(socket=str(tmp_path / "t.sock"), image="python:3"))
    with pytest.raises(ValueError, match="plain HTTP"):
        TEMENOS.open(SandboxSettings(socket="https://h:1"))
    missing = SandboxSettings(socket=str(tmp_path / "t.sock"), auth_token_file=str(tmp_path / "no"))
    problem = TEMENOS.problem(missing)
    assert problem is not None and f"cannot read the auth token file {tmp_path / 'no'}" in problem
