"""Attack: mount the daemon's own files, and what /proc shows of the host.

A sandbox that can write the daemon's config (`allow_network = true` appended), its code or its
virtualenv changes what the daemon does next; one that can read its lock file can flock it and
keep the daemon from ever restarting. Each is refused as itself and through any directory that
contains it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.sandboxd_harness import (
    REPO,
    Daemon,
    short_dir,
    wait_until_serving,
)

pytestmark = pytest.mark.docker


def _own_files(daemon: Daemon) -> dict[str, Path]:
    spec = importlib.util.find_spec("sandboxd")
    assert spec is not None and spec.submodule_search_locations
    files = {
        "config file": daemon.root / "sandboxd.toml",
        "lock file": daemon.socket.with_name(daemon.socket.name + ".lock"),
        "package": Path(spec.submodule_search_locations[0]),
    }
    if sys.prefix != sys.base_prefix:  # the daemon runs on this interpreter
        files["virtualenv"] = Path(sys.prefix)
    return files


@pytest.mark.parametrize("which", ["config file", "lock file", "package", "virtualenv"])
def test_the_daemons_own_files_are_never_mounted(daemon: Daemon, which: str) -> None:
    files = _own_files(daemon)
    if which not in files:
        pytest.skip("the daemon does not run in a virtualenv here")
    target = files[which]
    with daemon.client() as client:
        for path in (target, target.parent):
            response = client.post(
                "/v1/run",
                json={
                    "command": f"echo allow_network = true >> {target}",
                    "allowed_paths": [{"path": str(path), "read_only": False}],
                },
            )
            assert response.status_code == 403, (path, response.text)
            assert "daemon's" in response.json()["error"]["message"], response.text


def test_a_config_outside_the_config_directory_cannot_be_rewritten(docker_client: Any) -> None:
    """The attack as it was seen: a sandbox appends to the config, the next start obeys."""
    root = short_dir("own")
    elsewhere = root / "settings"
    elsewhere.mkdir()
    config = elsewhere / "sandboxd.toml"
    config.write_text(f'state_dir = "{root / "state"}"\n')
    daemon = start_daemon_with(root, config, root / "sd.sock")
    try:
        with daemon.client() as client:
            response = client.post(
                "/v1/run",
                json={
                    "command": f"echo 'allow_network = true' >> {config}",
                    "allowed_paths": [{"path": str(elsewhere), "read_only": False}],
                },
            )
        assert response.status_code == 403, response.text
        assert "allow_network" not in config.read_text()
    finally:
        daemon.stop()


def start_daemon_with(root: Path, config: Path, socket_path: Path) -> Daemon:
    """A daemon reading `config` as written (the harness generates a config of its own)."""
    log = root / "own-config.log"
    with open(log, "wb") as out:
        command = [sys.executable, "-m", "sandboxd", "serve", "--socket", str(socket_path)]
        proc = subprocess.Popen(
            [*command, "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=dict(os.environ),
        )
    daemon = Daemon(proc, root, socket_path, root / "state", root / "state" / "audit.log", log)
    wait_until_serving(daemon)
    return daemon


def test_proc_files_that_describe_the_host_are_masked(daemon: Daemon) -> None:
    probe = (
        "for f in /proc/keys /proc/timer_list /proc/sched_debug /proc/kcore "
        "/proc/latency_stats /proc/timer_stats; do "
        '[ -e "$f" ] || continue; printf "%s %s\\n" "$f" "$(head -c 64 "$f" 2>/dev/null | wc -c)"; '
        "done"
    )
    with daemon.client() as client:
        response = client.post("/v1/run", json={"command": probe})
    lines = response.json()["stdout"].splitlines()
    assert lines, response.text
    assert all(line.endswith(" 0") for line in lines), lines
