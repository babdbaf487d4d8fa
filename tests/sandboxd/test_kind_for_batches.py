"""What a batch asks of the sandboxd kind, against real daemons: its session cap, whether a
refusal only means "full, retry later", and a daemon started on demand on a node."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from logos.options import AllowedPath, ExecOptions
from logos.runners.sandboxes import SandboxSettings
from sandboxd.client.kind import SANDBOXD
from sandboxd.client.runner import SandboxRunner
from tests.support.processes import processes_matching
from tests.support.sandboxd_harness import containers_of, remove_kept, running_daemon, short_dir


@pytest.mark.docker
@pytest.mark.timeout(180)
@pytest.mark.anyio
async def test_the_session_cap_and_a_refusal_when_full(docker_client: Any) -> None:
    with running_daemon(docker_client, "max_sessions = 2\nmax_sessions_per_caller = 1\n") as d:
        settings = SandboxSettings(socket=str(d.socket))
        assert SANDBOXD.session_cap(settings) == 1
        first, second = SandboxRunner(d.socket), SandboxRunner(d.socket)
        async with second:
            async with first:
                assert (await first.run("true", ExecOptions())).ok
                full = await second.run("true", ExecOptions())
                assert full.error is not None and "429" in full.error
                assert SANDBOXD.refused_when_full(full)
                refused = await second.run(
                    "true", ExecOptions(allowed_paths=(AllowedPath("/etc"),))
                )
                assert refused.error is not None and not SANDBOXD.refused_when_full(refused)
            # the first session is closed: the same command now runs
            assert (await second.run("true", ExecOptions())).ok
    assert SANDBOXD.session_cap(SandboxSettings(socket=str(d.socket))) is None  # gone


@pytest.mark.docker
@pytest.mark.timeout(180)
@pytest.mark.anyio
async def test_a_preparation_refused_for_being_full_is_a_refusal_when_full(
    docker_client: Any,
) -> None:
    """A batch's runner prepares its sandbox first: when that start meets the cap, the first
    command says so, and the batch must know to wait and send it again."""
    with running_daemon(docker_client, "max_sessions = 2\nmax_sessions_per_caller = 1\n") as d:
        first, second = SandboxRunner(d.socket), SandboxRunner(d.socket)
        async with second:
            async with first:
                assert (await first.run("true", ExecOptions())).ok
                await second.prepare(ExecOptions())
                unprepared = await second.run("true", ExecOptions())
                assert unprepared.error is not None
                assert unprepared.error.startswith("the sandbox could not be prepared")
                assert "429" in unprepared.error
                assert SANDBOXD.refused_when_full(unprepared)
            assert (await second.run("true", ExecOptions())).ok


@pytest.mark.docker
@pytest.mark.timeout(180)
def test_ensure_running_starts_one_daemon_for_concurrent_callers(
    docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = short_dir()
    config = root / "sandboxd.toml"
    config.write_text(
        f'state_dir = "{root / "state"}"\naudit_log = "{root / "audit.log"}"\n'
        "shutdown_grace_s = 1\nmax_sessions = 4\nmax_sessions_per_caller = 4\n"
    )
    monkeypatch.setenv("SANDBOXD_CONFIG", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "xdg-state"))
    socket = root / "node.sock"
    settings = SandboxSettings(socket=str(socket))
    assert SANDBOXD.problem(settings) is not None  # nothing answers yet
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda _: SANDBOXD.ensure_running(settings), range(3)))
        assert SANDBOXD.problem(settings) is None
        daemons = processes_matching(f"serve --socket {socket}")
        assert len(daemons) == 1, daemons
        started = time.monotonic()
        SANDBOXD.ensure_running(settings)  # already healthy: returns at once
        assert time.monotonic() - started < 5
        assert (Path(root / "xdg-state" / "sandboxd" / "autostart.log")).exists()
    finally:
        for pid in processes_matching(f"serve --socket {socket}"):
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):
                if not processes_matching(f"serve --socket {socket}"):
                    break
                time.sleep(0.1)
            for container in containers_of(docker_client, pid):
                container.remove(force=True)
        remove_kept(docker_client, root / "state")


def test_ensure_running_reports_a_daemon_that_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("no_such_key = 1\n")
    monkeypatch.setenv("SANDBOXD_CONFIG", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    socket = short_dir() / "bad.sock"
    with pytest.raises(ValueError, match="could not start") as caught:
        SANDBOXD.ensure_running(SandboxSettings(socket=str(socket)))
    assert "no_such_key" in str(caught.value)
