"""The two ends of a supervisor's channel, byte by byte, for real on this host: what a
command of a supervisor gets (its three standard descriptors, nothing of the channel), and
the backend's end, which holds its two FIFO ends and none once the channel is lost, whatever
a supervisor taken over by a command sends.

Real processes and real FIFOs; no Docker needed.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.docker.supervisor_client import ChannelLost, SupervisorReply
from sandboxd.inside.supervisor import IN_FIFO, OUT_FIFO, PROTOCOL
from tests.support.processes import open_fds
from tests.support.sandboxd_harness import true_message
from tests.support.supervisor_fifos import RawFifos, make_fifos, raw_supervisor


class RawBackend:
    """The backend's end of a supervisor's channel, byte by byte: it sends what the real
    client never would."""

    def __init__(self, fifos: RawFifos, process: subprocess.Popen[bytes], control: Path) -> None:
        self.fifos = fifos
        self.process = process
        self.control = control
        self.hello = json.loads(fifos.hello)
        self._ids = iter(range(1, 1_000_000))

    def run(self, command: str, **extra: Any) -> Any:
        """The reply to a run of `command` (with `extra` fields), "stdout" and "stderr" in."""
        request_id = next(self._ids)
        message: dict[str, Any] = {
            "op": "run",
            "id": request_id,
            "command": command,
            "env": {},
            "cwd": "/",
            "timeout_s": 20.0,
            "max_output_bytes": 65536,
            "max_saved_output_bytes": 0,
            **extra,
        }
        self.fifos.write(json.dumps(message).encode() + b"\n")
        reply = json.loads(self.fifos.readline())
        assert reply["id"] == request_id, reply
        reply["stdout"] = self.fifos.read(reply.get("stdout_bytes", 0)).decode()
        reply["stderr"] = self.fifos.read(reply.get("stderr_bytes", 0)).decode()
        return reply

    def fds(self) -> int:
        return len(open_fds(self.process.pid))


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawBackend]:
    with raw_supervisor(tmp_path) as (fifos, process, control):
        backend = RawBackend(fifos, process, control)
        assert backend.hello["protocol"] == PROTOCOL
        assert not (control / IN_FIFO).exists() and not (control / OUT_FIFO).exists()
        # Settled: its command modules imported and a command's threads gone.
        assert backend.run("true")["exit_code"] == 0
        yield backend


def test_a_command_gets_its_three_descriptors_and_none_of_the_channel(raw: RawBackend) -> None:
    """Whatever a run asks for (here the FIFO fields an earlier protocol had, which passed a
    FIFO of the control directory to the command), the command holds stdin, stdout and
    stderr only, and the supervisor opens nothing for it."""
    (raw.control / "fork-1").write_text("not for commands\n")
    baseline = raw.fds()
    listing = 'ls /proc/$$/fd; echo "${SANDBOXD_PIPE_FD-unset}"'
    for extra in ({}, {"fifo": "fork-1", "fifo_write": True, "quiesce": True}):
        reply = raw.run(listing, **extra)
        assert reply["stdout"].split() == ["0", "1", "2", "unset"], reply
    assert raw.fds() == baseline


# --- the host's end of a channel: its two FIFO ends, and no other descriptor ----------------

# A supervisor taken over by a command: it answers runs, split in pieces, or with garbage.
HOSTILE_SUPERVISOR = textwrap.dedent(
    """
    import json, os, sys
    requests = os.open(os.path.join(sys.argv[1], "IN"), os.O_RDONLY)
    replies = os.open(os.path.join(sys.argv[1], "OUT"), os.O_WRONLY)
    mode = sys.argv[2]
    hello = {"hello": "sandboxd-supervisor", "protocol": PROTOCOL, "pid": 1, "shell": "x",
             "mounts": [], "unix_sockets": "denied"}
    os.write(replies, json.dumps(hello).encode() + b"\\n")
    lines = os.fdopen(requests, "rb")
    while True:
        line = lines.readline()
        if not line:
            break
        request = json.loads(line)
        if request.get("op") != "run":
            continue
        if mode == "garbage":
            os.write(replies, b"not json at all\\n")
            continue
        head = {"id": request["id"], "exit_code": 0, "stdout_bytes": 2, "stderr_bytes": 0,
                "duration_s": 0.0}
        data = json.dumps(head).encode() + b"\\n" + b"ok"
        for piece in (data[:5], data[5:-1], data[-1:]):
            os.write(replies, piece)
    """
).replace("PROTOCOL", str(PROTOCOL))
HOSTILE_SUPERVISOR = HOSTILE_SUPERVISOR.replace('"IN"', repr(IN_FIFO)).replace(
    '"OUT"', repr(OUT_FIFO)
)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["replies", "garbage"])
async def test_the_channel_holds_its_two_fifo_ends_and_none_once_lost(
    tmp_path: Path, mode: str
) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE_SUPERVISOR)
    before = open_fds()  # WHY only new ones are compared: an earlier test's may close meanwhile
    fifos = make_fifos(tmp_path)
    try:
        process = await anyio.open_process(
            [sys.executable, str(script), str(tmp_path), mode],
            stdin=subprocess.DEVNULL,
            stdout=None,
            stderr=None,
        )
        try:
            with anyio.fail_after(20):
                channel, _ = await fifos.handshake()
            with_channel = open_fds()
            assert len(with_channel - before) == 2, "its requests' end and its replies' end"
            assert not (tmp_path / IN_FIFO).exists() and not (tmp_path / OUT_FIFO).exists()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(channel.serve)
                for _ in range(3):
                    with anyio.fail_after(20):
                        reply = await channel.run(true_message(channel), reply_deadline_s=10)
                    if mode == "replies":
                        assert isinstance(reply, SupervisorReply), reply
                        assert (reply.exit_code, reply.stdout) == (0, "ok")
                        assert open_fds() - before == with_channel - before
                    else:  # given up, its FIFOs closed
                        assert isinstance(reply, ChannelLost), reply
                        assert "reply" in reply.reason or "gone" in reply.reason, reply.reason
                        assert open_fds() - before == set()
                channel.close("test over")
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            await process.aclose()
    finally:
        await fifos.aclose()
    assert open_fds() - before == set()
