"""Attack: another user of the machine connects to the server's Unix socket. uvicorn's own
`--uds` makes the socket 0666 (anyone could reach the API and, with any leaked token, run
commands as its owner); `logos serve --socket` binds it 0600 itself."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.cli_harness import Home, make_home
from tests.support.parts import require
from tests.support.sandboxd_harness import python_for_others, short_dir
from tests.support.serve_harness import serving
from tests.support.sse_server import ScriptedServer

pytestmark = pytest.mark.timeout(60)
NOBODY = 65534
CONNECT = """
import socket, sys
sock = socket.socket(socket.AF_UNIX)
try:
    sock.connect(sys.argv[1])
except OSError as exc:
    print(type(exc).__name__)
    raise SystemExit(0)
sock.sendall(b"GET /v1/sessions HTTP/1.1\\r\\nHost: logos\\r\\n\\r\\n")
print("connected", sock.recv(200).split(b"\\r\\n")[0].decode())
"""


def test_another_user_cannot_connect_to_the_socket(sse_server: ScriptedServer) -> None:
    require(os.getuid() == 0, "needs root to act as a second user")
    python = python_for_others()
    require(python is not None, "no Python interpreter another user can run")
    assert python is not None
    root = short_dir("serve")
    root.chmod(0o755)  # WHY: the directory lets anyone reach the socket; only its mode guards it
    home: Home = make_home(root)
    socket_path = root / "logos.sock"
    with serving(home, sse_server, ["--socket", str(socket_path)]):
        mode = socket_path.stat().st_mode & 0o777
        interpreter, env = python
        other = subprocess.run(
            [interpreter, "-c", CONNECT, str(socket_path)],
            capture_output=True,
            text=True,
            user=NOBODY,
            group=NOBODY,
            env=env,
            timeout=30,
        )
    assert other.stdout.strip() == "PermissionError", (oct(mode), other.stdout, other.stderr)
    assert mode == 0o600
