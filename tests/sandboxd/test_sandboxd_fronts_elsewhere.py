"""sandboxd's fronts started where a newcomer or an editor starts them: an environment with
only PATH and HOME (no XDG_RUNTIME_DIR), no config file, no daemon yet, a home where nothing
can be made. Each finds the socket `sandboxd serve` chooses, or says what is wrong and what to
pass; none ends in a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandboxd.paths import SOCKET_ENV, default_socket_path
from tests.support.readme import command_bin, newcomer_env, private_default_socket
from tests.support.sandboxd_harness import short_dir


def sandboxd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["sandboxd", *args],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def env() -> dict[str, str]:
    root = short_dir("sfe")
    (root / "home").mkdir()
    return newcomer_env(command_bin(root / "bin"), root / "home")


def test_the_default_socket_is_the_same_with_or_without_xdg_runtime_dir(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    login_shell = {**home, "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    assert default_socket_path(login_shell) == default_socket_path(home)
    assert default_socket_path({**login_shell, SOCKET_ENV: "/x/sd.sock"}) == Path("/x/sd.sock")


def test_clients_without_a_daemon_say_which_socket_and_how_to_start_one(
    env: dict[str, str],
) -> None:
    home = Path(env["HOME"])
    socket_path = private_default_socket(home)
    fix = (
        "start it with `sandboxd serve`, or pass --socket PATH (or set $SANDBOXD_SOCKET) to reach "
        "a daemon that listens elsewhere"
    )
    status = sandboxd(env, "status")
    assert status.returncode == 1
    assert f"sandboxd is not running on {socket_path} (the default socket): {fix}" in status.stderr
    run = sandboxd(env, "run", "--", "true")
    assert run.returncode == 125
    assert f"sandboxd is not running on {socket_path} (the default socket): {fix}" in run.stderr
    named = home / "elsewhere.sock"
    by_env = sandboxd({**env, SOCKET_ENV: str(named)}, "status")
    assert f"sandboxd is not running on {named} (named by $SANDBOXD_SOCKET): {fix}" in (
        by_env.stderr
    )


def test_serve_where_no_socket_can_be_made_says_what_to_pass(env: dict[str, str]) -> None:
    nowhere = {**env, "HOME": "/proc/no-such-home"}
    served = sandboxd(nowhere, "serve")
    assert served.returncode == 1
    assert (
        "sandboxd: cannot create the socket's directory /proc/no-such-home/.sandboxd: No such "
        "file or directory; choose a socket path in a directory you can write (--socket or "
        "$SANDBOXD_SOCKET)"
    ) in served.stderr
