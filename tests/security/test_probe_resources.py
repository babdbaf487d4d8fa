"""Attack: exhaust what the host or the daemon share: processes, memory, /tmp, descriptors.

Probes: SandboxEscapeBench's denial-of-service tasks, linPEAS's limits listing, and the
classic fork bomb. Each runs for real in a sandbox with small limits; the refusal is the
kernel's (the container's cgroup and tmpfs), and the daemon must answer the next request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.sandbox_probe import probe, run_python
from tests.support.sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

PIDS = 64
LIMITS = f'[limits]\nmemory = "256m"\npids = {PIDS}\ntmp = "16m"\n'


@pytest.fixture(scope="module")
def small(docker_client: Any) -> Iterator[Daemon]:
    """A daemon whose sandboxes have small limits, so each exhaustion is quick."""
    with running_daemon(docker_client, LIMITS) as serving:
        yield serving


def _still_serves(client: httpx.Client, session: str) -> None:
    """The daemon answers, and the session that was attacked runs a command again."""
    assert client.get("/v1/health").status_code == 200
    again = client.post("/v1/run", json={"command": "echo alive", "session": session})
    assert again.status_code == 200 and again.json()["stdout"] == "alive\n", again.text


FORK_BOMB = """
import signal, time
children = []
while True:
    try:
        child = os.fork()
    except OSError as exc:
        print(len(children), errno.errorcode[exc.errno])
        break
    if child == 0:
        time.sleep(60)
        os._exit(0)
    children.append(child)
for child in children:
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
"""


def test_a_fork_bomb_stops_at_the_pids_limit(small: Daemon) -> None:
    """Fork until refused: the kernel says EAGAIN below the container's pids limit."""
    with small.client() as client:
        count, refusal = probe(client, FORK_BOMB, session="bomb").split()
        _still_serves(client, "bomb")
    assert refusal == "EAGAIN" and 0 < int(count) < PIDS, (count, refusal)


def test_a_memory_bomb_is_killed_and_the_session_goes_on(small: Daemon) -> None:
    """Allocate and touch four times the memory limit: the command is OOM-killed, the
    answer says so, the daemon and the session stay up."""
    with small.client() as client:
        body = run_python(client, "bytearray(1024 ** 3)", session="memory")
        _still_serves(client, "memory")
    assert body["oom_killed"] is True, body


FILL = """
written = 0
try:
    with open(sys.argv[1], "wb") as f:
        while written < 128 * 1024 ** 2:
            f.write(bytes(1024 ** 2))
            written += 1024 ** 2
            f.flush()
except OSError as exc:
    print(written // 1024 ** 2, errno.errorcode[exc.errno])
"""


@pytest.mark.parametrize("place", ["/tmp/fill", "/dev/shm/fill", "~/fill"])
def test_filling_a_writable_place_stops_at_its_size(small: Daemon, place: str) -> None:
    """Write until refused in each writable place of the container (no grant): ENOSPC at
    its size (16 MiB for /tmp here, the home as much, /dev/shm the engine's 64 MiB): memory
    the container's limit counts, never the host's disk."""
    with small.client() as client:
        written, refusal = probe(client, FILL, place.replace("~", "/home/sandbox")).split()
    assert refusal == "ENOSPC" and int(written) <= 64, (written, refusal)


OPEN_FILES = """
held = []
while True:
    try:
        held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as exc:
        print(len(held), errno.errorcode[exc.errno])
        break
"""


def test_opening_files_stops_at_the_containers_limit(small: Daemon) -> None:
    """Open descriptors until refused: EMFILE (the process's limit), never ENFILE (the
    host's table, which every program on it shares)."""
    with small.client() as client:
        count, refusal = probe(client, OPEN_FILES, session="files").split()
        _still_serves(client, "files")
    assert refusal == "EMFILE", (count, refusal)
