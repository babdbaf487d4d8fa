"""Attack: reach a host Unix socket found under an allowed path.

A socket is connectable through a bind mount even when the mount is read-only (`connect()` is
not a write): a tmux server's socket in a project directory runs commands on the host as the
user, an ssh agent's signs with the user's keys. Sandboxed commands must not be able to create
Unix sockets at all, unless the daemon's config and the request both opt in.
"""

from __future__ import annotations

import os
import shlex
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.sandbox_probe import host_server
from tests.support.sandboxd_harness import Daemon, running_daemon, short_dir

pytestmark = pytest.mark.docker

CONNECT = """
import socket, sys
kind = socket.SOCK_DGRAM if sys.argv[2] == "dgram" else socket.SOCK_STREAM
try:
    if sys.argv[3] == "pair":
        mine, _ = socket.socketpair(socket.AF_UNIX, kind)
        if kind == socket.SOCK_DGRAM:
            mine.sendto(b"id\\n", sys.argv[1])
        else:
            mine.connect(sys.argv[1])
    else:
        peer = socket.socket(socket.AF_UNIX, kind)
        peer.connect(sys.argv[1])
        peer.sendall(b"id\\n")
    print("CONNECTED")
except OSError as exc:
    print(type(exc).__name__, exc.errno)
"""


def _try(client: httpx.Client, project: Path, target: Path, how: str, **fields: Any) -> str:
    kind, pair = how.split("-")
    command = f"python3 -c {shlex.quote(CONNECT)} {target} {kind} {pair}"
    response = client.post(
        "/v1/run",
        json={
            "command": command,
            "allowed_paths": [{"path": str(project), "read_only": True}],
            **fields,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["error"] is None, body
    return str(body["stdout"]).strip()


@pytest.mark.parametrize("how", ["stream-socket", "dgram-socket", "dgram-pair"])
def test_a_host_socket_under_a_read_only_mount_is_unreachable(daemon: Daemon, how: str) -> None:
    project = short_dir("unix")
    target = project / "tmux-0"
    kind = socket.SOCK_DGRAM if how.startswith("dgram") else socket.SOCK_STREAM
    with host_server(target, kind) as received, daemon.client() as client:
        outcome = _try(client, project, target, how, session=f"unix-{how}")
    assert outcome == "PermissionError 1", outcome
    assert received == [], "the host socket was reached"


def test_a_socket_made_after_the_mount_is_unreachable_too(daemon: Daemon) -> None:
    project = short_dir("unix")
    target = project / "agent.sock"
    with daemon.client() as client:
        warm = client.post(
            "/v1/run",
            json={
                "command": "true",
                "allowed_paths": [{"path": str(project), "read_only": True}],
                "session": "unix-later",
            },
        )
        assert warm.status_code == 200, warm.text
        with host_server(target) as received:
            outcome = _try(client, project, target, "stream-socket", session="unix-later")
    assert outcome == "PermissionError 1", outcome
    assert received == []


def _python_in_the_sandbox(daemon: Daemon, script: str) -> httpx.Response:
    """The daemon's answer to running `script` with the sandbox's python3."""
    with daemon.client() as client:
        return client.post("/v1/run", json={"command": f"python3 -c {shlex.quote(script)}"})


def test_what_needs_no_unix_socket_still_works(daemon: Daemon) -> None:
    """Stream pairs (pipes between processes, asyncio's wake-up pair) stay allowed."""
    script = (
        "import asyncio, socket\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'pair'); print(b.recv(4).decode())\n"
        "asyncio.run(asyncio.sleep(0)); print('asyncio')\n"
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(); print('inet')\n"
    )
    response = _python_in_the_sandbox(daemon, script)
    assert response.json()["stdout"].split() == ["pair", "asyncio", "inet"], response.text


def test_io_uring_is_refused(daemon: Daemon) -> None:
    """io_uring can create and connect sockets without the socket() system call."""
    script = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(425, 4, params)\n"
        "print('created' if fd >= 0 else os.strerror(ctypes.get_errno()))\n"
    )
    response = _python_in_the_sandbox(daemon, script)
    assert response.json()["stdout"].strip() == "Operation not permitted", response.text


def test_unix_sockets_need_the_config_and_the_request(docker_client: Any) -> None:
    project = short_dir("unix")
    target = project / "db.sock"
    with running_daemon(docker_client) as strict, strict.client() as client:
        refused = client.post("/v1/run", json={"command": "true", "unix_sockets": True})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "unix_sockets_refused"
    assert "allow_unix_sockets" in refused.json()["error"]["message"]
    with (
        running_daemon(docker_client, "allow_unix_sockets = true\n") as opted,
        opted.client() as client,
        host_server(target) as received,
    ):
        default = _try(client, project, target, "stream-socket", session="default-off")
        allowed = _try(
            client, project, target, "stream-socket", session="opted-in", unix_sockets=True
        )
    assert default == "PermissionError 1"
    assert allowed == "CONNECTED" and received == [b"id\n"]


@pytest.mark.parametrize(
    "root", ["/tmp", "/var/tmp", "/dev/shm", "/run/user/0", f"/run/user/{os.getuid()}"]
)
def test_directories_that_hold_other_programs_sockets_are_not_mount_roots(
    daemon: Daemon, root: str
) -> None:
    if not os.path.isdir(root):
        pytest.skip(f"{root} does not exist here")
    with daemon.client() as client:
        response = client.post(
            "/v1/run", json={"command": "true", "allowed_paths": [{"path": root}]}
        )
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "path_refused"


def test_a_directory_inside_tmp_stays_mountable(daemon: Daemon) -> None:
    inside = short_dir("unix")
    with daemon.client() as client:
        response = client.post(
            "/v1/run", json={"command": "true", "allowed_paths": [{"path": str(inside)}]}
        )
    assert response.status_code == 200 and response.json()["exit_code"] == 0, response.text
