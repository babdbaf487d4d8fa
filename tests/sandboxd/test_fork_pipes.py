"""The pieces a fork's copy goes through, for real on this host: descriptors passed to the
supervisor with its requests (and, from a hostile one, back), and the relay that fans one
pipe out into several.

Real processes, real pipes, a real Unix socket; no Docker needed (tests/sandboxd/test_fork.py
forks real sandboxes).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.docker import fork
from sandboxd.docker.container import PYTHON_FLAGS, install_supervisor
from sandboxd.docker.fork import ForkCopyError, relay
from sandboxd.supervisor import MAX_PENDING_FDS, PIPE_FD_VARIABLE, PROTOCOL
from sandboxd.supervisor_client import ChannelLost, SupervisorChannel, SupervisorReply
from tests.support.sandboxd_harness import true_message

PIPE_ERROR = "the request's pipe did not arrive with it"


def open_fds(pid: int | str = "self") -> set[int]:
    return {int(name) for name in os.listdir(f"/proc/{pid}/fd")}


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def until(condition: Any, what: str, timeout_s: float = 10.0) -> None:
    give_up = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < give_up, f"never happened: {what}"
        time.sleep(0.01)


class RawBackend:
    """The backend's end of a supervisor connection, byte by byte: it sends what the real
    client never would (a pipe run without its descriptor, descriptors with no run)."""

    def __init__(self, conn: socket.socket, process: subprocess.Popen[bytes]) -> None:
        self.conn = conn
        self.process = process
        self.replies = conn.makefile("rb")
        self.hello = json.loads(self.replies.readline())
        self._ids = iter(range(1, 1_000_000))

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        line = json.dumps(message).encode() + b"\n"
        if fds:
            socket.send_fds(self.conn, [line], fds)
        else:
            self.conn.sendall(line)

    def queue(self, *fds: int) -> None:
        """Descriptors with a line that runs nothing (a "forget" of no command)."""
        self.send({"op": "forget", "id": 0}, list(fds))

    def run(self, command: str, *, pipe: int | None = None, claim: bool | None = None) -> Any:
        """Its reply's head, with "stdout" and "stderr" filled in. `pipe` goes with the line;
        `claim` (default: whether a pipe goes) is the line's "pipe" field."""
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
        }
        if claim if claim is not None else pipe is not None:
            message["pipe"] = True
        self.send(message, None if pipe is None else [pipe])
        reply = json.loads(self.replies.readline())
        assert reply["id"] == request_id, reply
        reply["stdout"] = self.replies.read(reply.get("stdout_bytes", 0)).decode()
        reply["stderr"] = self.replies.read(reply.get("stderr_bytes", 0)).decode()
        return reply

    def fds(self) -> int:
        return len(open_fds(self.process.pid))


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawBackend]:
    socket_path = str(tmp_path / "s")
    script = install_supervisor(tmp_path)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(socket_path)
        listener.listen(1)
        listener.settimeout(20)
        process = subprocess.Popen(
            [sys.executable, *PYTHON_FLAGS, str(script), socket_path, str(tmp_path / "out")]
        )
        try:
            conn, _ = listener.accept()
            conn.settimeout(20)
            with conn:
                backend = RawBackend(conn, process)
                # Settled: its command modules imported and a command's threads gone.
                assert backend.run("true")["exit_code"] == 0
                yield backend
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()


def pipe_pair() -> tuple[int, int]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    return read, write


def drained(read: int) -> bytes | None:
    """What the pipe holds, if every writing end is closed; None while one is open."""
    data = b""
    while True:
        try:
            chunk = os.read(read, 65536)
        except BlockingIOError:
            return None
        if not chunk:
            return data
        data += chunk


def test_a_pipe_runs_command_writes_into_the_descriptor_it_came_with(raw: RawBackend) -> None:
    read, write = pipe_pair()
    try:
        reply = raw.run(f'echo through >&"${PIPE_FD_VARIABLE}"; echo fine', pipe=write)
        os.close(write)
        assert (reply["exit_code"], reply["stdout"]) == (0, "fine\n"), reply
        # The end: the supervisor's copy is closed too, once the command ended.
        assert drained(read) == b"through\n"
    finally:
        os.close(read)


def test_a_pipe_runs_command_reads_from_the_descriptor_it_came_with(raw: RawBackend) -> None:
    read, write = os.pipe()
    os.write(write, b"from the backend\n")
    os.close(write)
    reply = raw.run(f'cat <&"${PIPE_FD_VARIABLE}"', pipe=read)
    os.close(read)
    assert (reply["exit_code"], reply["stdout"]) == (0, "from the backend\n"), reply


def test_a_pipe_run_without_its_descriptor_is_refused_and_serving_goes_on(
    raw: RawBackend,
) -> None:
    reply = raw.run("echo ran", claim=True)
    assert reply["error"] == PIPE_ERROR and reply.get("exit_code") is None, reply
    assert raw.run("echo still serving")["stdout"] == "still serving\n"


def test_a_pipe_command_gets_its_own_descriptor_and_no_other(raw: RawBackend) -> None:
    ends = [pipe_pair() for _ in range(2)]
    raw.queue(ends[0][1], ends[1][1])
    for _, write in ends:
        os.close(write)
    listing = f'ls /proc/$$/fd; echo "${PIPE_FD_VARIABLE}"'  # the shell's, seen by ls
    reply = raw.run(listing, claim=True)
    *fds, named = reply["stdout"].split()
    assert sorted(fds, key=int) == sorted(["0", "1", "2", named], key=int), reply
    # The oldest was taken and is closed now; the other stays queued for the next pipe run.
    assert (drained(ends[0][0]), drained(ends[1][0])) == (b"", None)
    reply = raw.run(f'echo second >&"${PIPE_FD_VARIABLE}"', claim=True)
    assert reply["exit_code"] == 0 and drained(ends[1][0]) == b"second\n"
    for read, _ in ends:
        os.close(read)


def test_a_run_without_pipe_never_takes_a_queued_descriptor(raw: RawBackend) -> None:
    read, write = pipe_pair()
    baseline = raw.fds()
    raw.queue(write)
    os.close(write)
    for _ in range(3):
        plain = raw.run(f'echo "${{{PIPE_FD_VARIABLE}-unset}}"; ls /proc/self/fd | wc -l')
        assert plain["stdout"].split()[0] == "unset", plain
    assert raw.fds() == baseline + 1
    assert drained(read) is None
    assert raw.run(f'echo mine >&"${PIPE_FD_VARIABLE}"', claim=True)["exit_code"] == 0
    assert drained(read) == b"mine\n"
    os.close(read)
    until(lambda: raw.fds() == baseline, "the supervisor's descriptor count back to before")


def test_the_supervisor_keeps_no_descriptor_its_command_ended_with(raw: RawBackend) -> None:
    baseline = raw.fds()
    for _ in range(20):
        read, write = os.pipe()
        reply = raw.run(f'echo x >&"${PIPE_FD_VARIABLE}"', pipe=write)
        os.close(write)
        assert reply["exit_code"] == 0 and os.read(read, 10) == b"x\n"
        os.close(read)
    # One that fails to start (a missing cwd) gives its descriptor back too.
    read, write = pipe_pair()
    raw.send(
        {
            "op": "run",
            "id": 999,
            "command": "true",
            "env": {},
            "cwd": "/no/such/dir",
            "timeout_s": 5,
            "max_output_bytes": 100,
            "max_saved_output_bytes": 0,
            "pipe": True,
        },
        [write],
    )
    os.close(write)
    failed = json.loads(raw.replies.readline())
    assert failed["id"] == 999 and "/no/such/dir" in failed["error"], failed
    assert drained(read) == b""
    os.close(read)
    until(lambda: raw.fds() == baseline, "the supervisor's descriptor count back to before")


def test_descriptors_no_run_claims_are_closed_past_the_bound(raw: RawBackend) -> None:
    baseline = raw.fds()
    count = MAX_PENDING_FDS + 6
    ends = [pipe_pair() for _ in range(count)]
    for _, write in ends:
        raw.queue(write)  # one line each: the supervisor, not the kernel, drops the oldest
        os.close(write)
    assert raw.run("true")["exit_code"] == 0  # every line before it was read
    assert raw.fds() == baseline + MAX_PENDING_FDS
    assert [drained(read) for read, _ in ends[:6]] == [b""] * 6
    assert all(drained(read) is None for read, _ in ends[6:])
    # The oldest one kept goes with the next pipe run.
    assert raw.run(f'echo next >&"${PIPE_FD_VARIABLE}"', claim=True)["exit_code"] == 0
    assert drained(ends[6][0]) == b"next\n"
    assert raw.fds() == baseline + MAX_PENDING_FDS - 1
    # Hung up on, it closes the rest (they see their end) and exits.
    raw.conn.shutdown(socket.SHUT_RDWR)
    assert raw.process.wait(timeout=20) == 0
    assert [drained(read) for read, _ in ends[7:]] == [b""] * (count - 7)
    for read, _ in ends:
        os.close(read)


# A supervisor taken over by a command: every line it sends carries descriptors.
HOSTILE_SUPERVISOR = textwrap.dedent(
    """
    import json, os, socket, sys
    peer = socket.socket(socket.AF_UNIX)
    peer.connect(sys.argv[1])
    mode = sys.argv[2]
    junk = [os.open("/dev/null", os.O_RDONLY) for _ in range(5)] + list(os.pipe()) + [peer.fileno()]
    hello = {"hello": "sandboxd-supervisor", "protocol": PROTOCOL, "pid": 1, "shell": "x",
             "mounts": [], "unix_sockets": "denied"}
    socket.send_fds(peer, [json.dumps(hello).encode() + b"\\n"], junk)
    lines = peer.makefile("rb")
    while True:
        line = lines.readline()
        if not line:
            break
        request = json.loads(line)
        if request.get("op") != "run":
            continue
        if mode == "garbage":
            socket.send_fds(peer, [b"not json at all\\n"], junk)
            continue
        head = {"id": request["id"], "exit_code": 0, "stdout_bytes": 2, "stderr_bytes": 0,
                "duration_s": 0.0}
        data = json.dumps(head).encode() + b"\\n" + b"ok"
        # Split: the descriptors come with each piece of the reply.
        for piece in (data[:5], data[5:-1], data[-1:]):
            socket.send_fds(peer, [piece], junk)
    """
).replace("PROTOCOL", str(PROTOCOL))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["replies", "garbage"])
async def test_descriptors_a_hostile_supervisor_sends_are_never_held(
    tmp_path: Path, mode: str
) -> None:
    socket_path = tmp_path / "s"
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE_SUPERVISOR)
    before = open_fds()
    listener = await anyio.create_unix_listener(socket_path)
    process = await anyio.open_process([sys.executable, str(script), str(socket_path), mode])
    try:
        with anyio.fail_after(20):
            channel, _ = await SupervisorChannel.accept(listener)
        await listener.aclose()
        with_channel = open_fds()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(channel.serve)
            for _ in range(3):
                with anyio.fail_after(20):
                    reply = await channel.run(true_message(channel), reply_deadline_s=10)
                if mode == "replies":
                    assert isinstance(reply, SupervisorReply), reply
                    assert (reply.exit_code, reply.stdout) == (0, "ok")
                    assert open_fds() == with_channel
                else:  # given up, its connection closed
                    assert isinstance(reply, ChannelLost), reply
                    assert "reply" in reply.reason or "gone" in reply.reason, reply.reason
                    assert open_fds() < with_channel
            channel.close("test over")
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    await process.aclose()
    assert open_fds() == before


# --- relay: one pipe fanned out to several, with real processes at both ends ---------------

SLOW_READER = textwrap.dedent(
    """
    import hashlib, sys, time
    digest = hashlib.sha256()
    while chunk := sys.stdin.buffer.read(16384):
        digest.update(chunk)
        time.sleep(0.002)
    print(digest.hexdigest())
    """
)


@pytest.fixture
def payload() -> Iterator[tuple[Path, str]]:
    """8 MiB of random bytes in a file, and their sha256."""
    data = os.urandom(8 * 1024**2)
    with tempfile.NamedTemporaryFile(prefix="relay-", delete=False) as file:
        file.write(data)
    yield Path(file.name), hashlib.sha256(data).hexdigest()
    os.unlink(file.name)


def source_process(command: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """`command` writing into a new pipe; the pipe's reading end."""
    read, write = os.pipe()
    process = subprocess.Popen(command, stdout=write)
    os.close(write)
    return process, read


def target_process(command: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """`command` reading from a new pipe; the pipe's writing end."""
    read, write = os.pipe()
    process = subprocess.Popen(command, stdin=read, stdout=subprocess.PIPE)
    os.close(read)
    return process, write


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    """A relay that stalls fails within seconds, not minutes."""
    monkeypatch.setattr(fork, "IO_TIMEOUT_S", 1.0)
    return 1.0


def finish(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.communicate(timeout=20)


def test_every_target_gets_the_same_bytes_at_its_own_pace(payload: tuple[Path, str]) -> None:
    path, digest = payload
    before = open_fds()
    source, source_read = source_process(["cat", str(path)])
    targets = [
        target_process(["sha256sum"]),
        target_process([sys.executable, "-c", SLOW_READER]),
        target_process(["sha256sum"]),
    ]
    abort_read, abort_write = os.pipe()
    given = [source_read, *(write for _, write in targets), abort_read]
    sent = relay(source_read, [write for _, write in targets], abort_read)
    assert not [fd for fd in given if is_open(fd)], "the relay closes what it was given"
    os.close(abort_write)
    assert sent == path.stat().st_size
    assert source.wait(timeout=20) == 0
    for process, _ in targets:
        out, _ = process.communicate(timeout=60)
        assert out.decode().split()[0] == digest
    assert open_fds() == before


def test_a_target_that_stops_reading_fails_the_copy_and_names_its_fork(
    payload: tuple[Path, str],
) -> None:
    path, _ = payload
    before = open_fds()
    source, source_read = source_process(["cat", str(path)])
    targets = [
        target_process(["sha256sum"]),
        target_process(["head", "-c", "1000"]),
        target_process(["sha256sum"]),
    ]
    abort_read, abort_write = os.pipe()
    with pytest.raises(ForkCopyError, match="fork 2 stopped taking the copy"):
        relay(source_read, [write for _, write in targets], abort_read)
    os.close(abort_write)
    finish(source, *(process for process, _ in targets))
    assert open_fds() == before


def test_closing_the_abort_pipe_stops_the_relay_at_once(tmp_path: Path) -> None:
    before = open_fds()
    # The source sends a little, then neither sends more nor ends.
    source, source_read = source_process(["sh", "-c", "head -c 100000 /dev/zero; exec sleep 60"])
    copies = [tmp_path / f"copy{index}" for index in range(2)]
    targets = [target_process(["sh", "-c", f"cat > {copy}"]) for copy in copies]
    abort_read, abort_write = os.pipe()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        relayed = pool.submit(relay, source_read, [write for _, write in targets], abort_read)
        until(
            lambda: all(copy.exists() and copy.stat().st_size == 100000 for copy in copies),
            "the data relayed",
        )
        assert not relayed.done()
        stopped_at = time.monotonic()
        os.close(abort_write)
        with pytest.raises(ForkCopyError, match="the fork was stopped"):
            relayed.result(timeout=10)
        assert time.monotonic() - stopped_at < 2.0
    finish(source, *(process for process, _ in targets))
    assert open_fds() == before


@pytest.mark.parametrize("stalled", ["source", "target"])
def test_a_relay_where_no_byte_moves_fails_within_its_timeout(
    short_timeout: float, payload: tuple[Path, str], stalled: str
) -> None:
    path, _ = payload
    before = open_fds()
    if stalled == "source":  # sends a little, then nothing, and never ends
        source, source_read = source_process(["sh", "-c", "echo some; exec sleep 60"])
        targets = [target_process(["sh", "-c", "cat >/dev/null"]) for _ in range(2)]
    else:  # one target never reads: its pipe fills up
        source, source_read = source_process(["cat", str(path)])
        targets = [target_process(["sh", "-c", "cat >/dev/null"]), target_process(["sleep", "60"])]
    abort_read, abort_write = os.pipe()
    started = time.monotonic()
    with pytest.raises(ForkCopyError, match=f"moved no byte for {short_timeout:.0f} s"):
        relay(source_read, [write for _, write in targets], abort_read)
    assert short_timeout <= time.monotonic() - started < short_timeout + 5
    os.close(abort_write)
    finish(source, *(process for process, _ in targets))
    assert open_fds() == before
