"""The `sandboxd` command, run as a real process against a real daemon and Docker engine."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import run_module
from tests.support.sandboxd_harness import REPO, Daemon, short_dir

pytestmark = pytest.mark.docker


def sandboxd(
    *args: str, cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SANDBOXD_CONFIG": "/nonexistent/sandboxd.toml"}
    return run_module("sandboxd", *args, cwd=cwd, timeout=timeout, env=env)


def test_without_a_subcommand_it_prints_usage() -> None:
    run = sandboxd()
    assert run.returncode == 2 and "usage: sandboxd" in run.stderr


def test_run_passes_output_through_and_exits_with_the_command(daemon: Daemon) -> None:
    run = sandboxd("run", "--socket", str(daemon.socket), "--", "echo out; echo err >&2; exit 7")
    assert (run.returncode, run.stdout, run.stderr) == (7, "out\n", "err\n")
    words = sandboxd("run", "--socket", str(daemon.socket), "--", "printf", "%s|", "a b", "c")
    assert (words.returncode, words.stdout) == (0, "a b|c|")


def test_run_mounts_relative_paths_and_sets_env(daemon: Daemon, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    run = sandboxd(
        "run",
        "--socket",
        str(daemon.socket),
        "--allow",
        "work:rw",
        "--env",
        "WHO=cli",
        "--",
        'echo "$WHO" > made; pwd',
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{tmp_path / 'work'}\n"
    assert (tmp_path / "work" / "made").read_text() == "cli\n"


def test_run_reports_timeouts_refusals_and_a_missing_daemon(daemon: Daemon) -> None:
    timed_out = sandboxd("run", "--socket", str(daemon.socket), "--timeout", "1", "--", "sleep 30")
    assert timed_out.returncode == 124 and "timed out after 1 s" in timed_out.stderr
    refused = sandboxd("run", "--socket", str(daemon.socket), "--allow", "/etc", "--", "true")
    assert refused.returncode == 125
    assert "refused /etc: the system directory /etc is never mountable" in refused.stderr
    nowhere = short_dir() / "absent.sock"
    missing = sandboxd("run", "--socket", str(nowhere), "--", "true")
    assert missing.returncode == 125
    assert (
        f"sandboxd is not running on {nowhere}: start it with `sandboxd serve --socket {nowhere}`"
        in missing.stderr
    )
    empty = sandboxd("run", "--socket", str(daemon.socket))
    assert empty.returncode == 2 and "no command given" in empty.stderr


def test_status_shows_health_and_sessions(daemon: Daemon) -> None:
    kept = sandboxd("run", "--socket", str(daemon.socket), "--session", "status-demo", "--", "true")
    assert kept.returncode == 0
    status = sandboxd("status", "--socket", str(daemon.socket))
    assert status.returncode == 0, status.stderr
    assert f"is up on {daemon.socket}" in status.stdout
    assert "image logos-sandbox:latest: present" in status.stdout
    assert "status-demo: 1 container(s), 0 running" in status.stdout
    assert re.search(r"containers: [1-9]\d* of at most \d+ \(\d+ per caller\)", status.stdout)
    assert "warm pool: off ([pool] size = 0): every new session starts a container" in status.stdout
    absent = short_dir() / "absent.sock"
    down = sandboxd("status", "--socket", str(absent))
    assert down.returncode == 1
    assert f"start it with `sandboxd serve --socket {absent}`" in down.stderr


def test_gc_goes_through_a_running_daemon_or_sweeps_directly(
    daemon: Daemon, tmp_path: Path
) -> None:
    through = sandboxd("gc", "--socket", str(daemon.socket))
    assert through.returncode == 0, through.stderr
    assert "through the daemon" in through.stdout
    config = tmp_path / "gc.toml"
    config.write_text(f'state_dir = "{short_dir()}"\n')
    directly = sandboxd("gc", "--socket", str(short_dir() / "absent.sock"), "--config", str(config))
    assert directly.returncode == 0, directly.stderr
    assert "no daemon answers on" in directly.stdout


def test_serve_refuses_a_bad_config_with_the_reason(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("allow_netwrok = true\n")
    run = sandboxd("serve", "--socket", str(short_dir() / "s.sock"), "--config", str(config))
    assert run.returncode == 2
    assert f"config file {config}: unknown key 'allow_netwrok'" in run.stderr


@pytest.mark.timeout(300)
def test_doctor_checks_everything_and_sees_the_daemon(daemon: Daemon, tmp_path: Path) -> None:
    config = tmp_path / "doctor.toml"
    config.write_text(f'state_dir = "{short_dir()}"\n')
    run = sandboxd("doctor", "--socket", str(daemon.socket), "--config", str(config), timeout=280)
    assert run.returncode == 0, run.stdout + run.stderr
    checks = (
        "engine",
        "image",
        "mounts",
        "identity",
        "network",
        "unix sockets",
        "supervisor",
        "egress",
        "limits",
        "daemon",
    )
    for check in checks:
        assert f"ok    {check}:" in run.stdout, run.stdout
    assert "all checks passed" in run.stdout
    note = re.search(
        r"--    warm pool: off \(the default\): a new session's sandbox started here in "
        r"(\d+) ms\. Turn it on with `\[pool\] size = 2`",
        run.stdout,
    )
    assert note is not None and 0 < int(note[1]) < 60_000, run.stdout
    assert "`sandboxd run` in a script or a loop" in run.stdout


@pytest.mark.timeout(300)
def test_doctor_says_when_the_warm_pool_is_on(tmp_path: Path) -> None:
    config = tmp_path / "doctor.toml"
    config.write_text(f'state_dir = "{short_dir()}"\n[pool]\nsize = 3\n')
    run = sandboxd("doctor", "--socket", str(short_dir() / "absent.sock"), "--config", str(config))
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(
        r"ok    warm pool: on, \[pool\] size = 3: a new session's sandbox started here in \d+ "
        r"ms; a spec started again within 600 s takes a warm one instead",
        run.stdout,
    ), run.stdout


def test_doctor_fails_on_a_missing_image_with_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "doctor.toml"
    config.write_text(f'state_dir = "{short_dir()}"\nimage = "sandboxd-test-missing:latest"\n')
    absent = short_dir() / "absent.sock"
    run = sandboxd("doctor", "--socket", str(absent), "--config", str(config))
    assert run.returncode == 1
    assert "FAIL  image: sandboxd-test-missing:latest is missing" in run.stdout
    assert "fix: run `sandboxd build-image`" in run.stdout
    assert f"--    daemon: sandboxd is not running on {absent}: start it with" in run.stdout


@pytest.mark.timeout(300)
def test_build_image_builds_from_a_local_base(docker_client: Any) -> None:
    base = "logos-sandbox-base:bookworm"
    try:
        docker_client.images.get(base)
    except Exception:
        pytest.skip(f"no local base image {base} (scripts/setup-docker makes one)")
    tag = "sandboxd-test-build:latest"
    try:
        run = sandboxd("build-image", "--base", base, "--tag", tag, timeout=280)
        assert run.returncode == 0, run.stderr
        assert f"built {tag}" in run.stdout
        assert docker_client.images.get(tag).id in run.stdout
    finally:
        with contextlib.suppress(Exception):
            docker_client.images.remove(tag)
