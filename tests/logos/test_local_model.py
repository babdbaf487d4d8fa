"""LocalModelServer stops llama.cpp for real: after use, after a failed start, after Ctrl-C.

The server runs inside the calling process, so "stopped" means its port no longer answers.
Each test starts its own short-lived server on the small test model (no shared fixture: what
is tested is the start and the stop).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from logos.errors import LocalModelError
from logos.models.llama_server import LocalModelServer
from tests.support.llama import REPO

pytestmark = [pytest.mark.llama, pytest.mark.usefixtures("xllamacpp_installed")]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def test_stop_closes_the_port(gguf: Path) -> None:
    port = free_port()
    with LocalModelServer(gguf, n_ctx=512, threads=1, port=port) as server:
        assert server.base_url == f"http://127.0.0.1:{port}"
        assert answers(port)
    assert not server.running
    assert not answers(port)


def test_a_failed_start_leaves_no_server_behind_while_its_error_is_kept(gguf: Path) -> None:
    # A zero start-up budget fails right after llama.cpp has bound its port.
    port = free_port()
    server = LocalModelServer(gguf, n_ctx=512, threads=1, port=port, startup_timeout_s=0)
    with pytest.raises(LocalModelError, match="did not become healthy") as caught:
        server.start()
    # `caught` holds the error and its traceback, as a caller that logs or re-raises it does.
    assert caught.value is not None
    assert not server.running
    assert not answers(port)


# Runs in a child process: Ctrl-C is delivered while llama.cpp loads the model (the timer fires
# 50 ms into start(); loading takes several times that). start() must give up at once, and the
# half-started server must be gone soon after: its port closes once it has finished loading.
_INTERRUPTED_START = """
import json, os, signal, socket, sys, threading, time
import xllamacpp  # imported before the clock starts
from logos.models.llama_server import LocalModelServer

path, port = sys.argv[1], int(sys.argv[2])
server = LocalModelServer(path, n_ctx=512, threads=1, port=port)
threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    server.start()
except KeyboardInterrupt:
    interrupted = True
else:
    interrupted = False


def answers():
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


deadline = time.monotonic() + 60
while answers() and time.monotonic() < deadline:
    time.sleep(0.1)
print(json.dumps({"interrupted": interrupted, "running": server.running, "answers": answers()}))
"""


@pytest.mark.timeout(180)
def test_ctrl_c_while_the_model_loads_stops_the_server(gguf: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_INTERRUPTED_START), str(gguf), str(free_port())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=150,  # a hang here is the defect: llama.cpp freed before its loop ran
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    outcome = json.loads(child.stdout.splitlines()[-1])
    assert outcome["interrupted"], "start() finished before the Ctrl-C landed: nothing tested"
    assert outcome == {"interrupted": True, "running": False, "answers": False}


def test_an_installed_xllamacpp_that_cannot_load_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message a fresh machine without the OpenMP runtime gets: not "not installed"."""
    broken = tmp_path / "xllamacpp"
    broken.mkdir()
    (broken / "__init__.py").write_text(
        "raise ImportError('libgomp.so.1: cannot open shared object file: No such file or "
        "directory')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "xllamacpp", raising=False)
    with pytest.raises(LocalModelError) as caught:
        LocalModelServer(Path("/nonexistent.gguf")).start()
    message = str(caught.value)
    assert "installed but cannot be loaded" in message and "apt-get install libgomp1" in message
