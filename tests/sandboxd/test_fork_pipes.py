"""The pieces a fork's copy goes through, for real on this host: the FIFOs a supervisor opens
for a run's command, the host's end of its channel, and the relay that parses the source's
archive, checks every member and writes a new one into every target.

Real processes, real FIFOs and pipes, real tar archives; no Docker needed
(tests/sandboxd/test_fork.py forks real sandboxes).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import hashlib
import io
import json
import os
import shlex
import stat
import subprocess
import sys
import tarfile
import termios
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.docker import fork
from sandboxd.docker.fifo import make_fifo, open_reading, open_writing_early
from sandboxd.docker.fork import ArchiveCheck, ArchiveRefused, ForkCopyError, relay
from sandboxd.docker.supervisor_client import ChannelLost, SupervisorReply
from sandboxd.inside.supervisor import IN_FIFO, OUT_FIFO, PIPE_FD_VARIABLE, PROTOCOL
from tests.support.sandboxd_harness import true_message
from tests.support.supervisor_fifos import RawFifos, make_fifos, raw_supervisor

PIPE_FD = f'"${PIPE_FD_VARIABLE}"'


def open_fds(pid: int | str = "self") -> set[int]:
    return {int(name) for name in os.listdir(f"/proc/{pid}/fd")}


def left_open(before: set[int]) -> set[int]:
    """The descriptors open now that were not at `before`. WHY not all of them compared: a
    thread or a finaliser left by an earlier test of this process may close its own meanwhile;
    what the code under test must not do is leave one of its own open."""
    return open_fds() - before


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def until(condition: Callable[[], object], what: str, timeout_s: float = 10.0) -> None:
    give_up = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < give_up, f"never happened: {what}"
        time.sleep(0.01)


def queued(fd: int) -> int:
    """Bytes in the pipe or FIFO `fd` is an end of, not read yet."""
    buffer = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buffer)
    return int.from_bytes(buffer, "little")


def drained(read: int) -> bytes | None:
    """What the (non-blocking) pipe holds, if every writing end is closed; None while one is
    open."""
    data = b""
    while True:
        try:
            chunk = os.read(read, 65536)
        except BlockingIOError:
            return None
        if not chunk:
            return data
        data += chunk


# --- the supervisor's FIFO runs, byte by byte ------------------------------------------------


class RawBackend:
    """The backend's end of a supervisor's channel, byte by byte: it sends what the real
    client never would (a FIFO no backend made, a name no backend gives)."""

    def __init__(self, fifos: RawFifos, process: subprocess.Popen[bytes], control: Path) -> None:
        self.fifos = fifos
        self.process = process
        self.control = control
        self.hello = json.loads(fifos.hello)
        self._ids = iter(range(1, 1_000_000))

    def send(self, message: dict[str, Any]) -> None:
        self.fifos.write(json.dumps(message).encode() + b"\n")

    def send_run(
        self,
        command: str,
        *,
        fifo: str | None = None,
        fifo_write: bool = False,
        cwd: str = "/",
    ) -> int:
        request_id = next(self._ids)
        message: dict[str, Any] = {
            "op": "run",
            "id": request_id,
            "command": command,
            "env": {},
            "cwd": cwd,
            "timeout_s": 20.0,
            "max_output_bytes": 65536,
            "max_saved_output_bytes": 0,
        }
        if fifo is not None:
            message.update(fifo=fifo, fifo_write=fifo_write)
        self.send(message)
        return request_id

    def reply(self, request_id: int) -> Any:
        """The next reply's head, with "stdout" and "stderr" filled in; it must be
        `request_id`'s."""
        reply = json.loads(self.fifos.readline())
        assert reply["id"] == request_id, reply
        reply["stdout"] = self.fifos.read(reply.get("stdout_bytes", 0)).decode()
        reply["stderr"] = self.fifos.read(reply.get("stderr_bytes", 0)).decode()
        return reply

    def run(self, command: str, **fields: Any) -> Any:
        return self.reply(self.send_run(command, **fields))

    def make_fifo(self, name: str) -> Path:
        """A FIFO in the control directory, as the backend makes one for a run."""
        path = self.control / name
        make_fifo(path, os.getuid(), os.getgid())
        return path

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


def test_a_fifo_runs_command_writes_into_its_fifo(raw: RawBackend) -> None:
    read = open_reading(raw.make_fifo("fork-1"))
    try:
        reply = raw.run(f"echo through >&{PIPE_FD}; echo fine", fifo="fork-1", fifo_write=True)
        assert (reply["exit_code"], reply["stdout"]) == (0, "fine\n"), reply
        # The end: the supervisor's end is closed too, once the command ended.
        assert drained(read) == b"through\n"
    finally:
        os.close(read)


def test_a_fifo_runs_command_reads_from_its_fifo(raw: RawBackend) -> None:
    early = open_writing_early(raw.make_fifo("fork-2"))
    try:
        os.write(early, b"from the backend\n")
        request = raw.send_run(f"cat <&{PIPE_FD}", fifo="fork-2")
        until(lambda: queued(early) == 0, "the command read what the backend wrote")
    finally:
        os.close(early)  # the FIFO's only writer: its reader sees the end
    reply = raw.reply(request)
    assert (reply["exit_code"], reply["stdout"]) == (0, "from the backend\n"), reply


@pytest.mark.parametrize(
    ("name", "fifo_write", "why"),
    [
        ("missing", True, "cannot open the FIFO missing: No such file or directory"),
        ("missing", False, "cannot open the FIFO missing: No such file or directory"),
        (IN_FIFO, True, "cannot open the FIFO in: No such file or directory"),  # unlinked
        ("../elsewhere", False, "the FIFO name '../elsewhere' is not one the backend makes"),
        ("a/b", False, "the FIFO name 'a/b' is not one the backend makes"),
        ("Fork-1", False, "the FIFO name 'Fork-1' is not one the backend makes"),
        ("fork 1", True, "the FIFO name 'fork 1' is not one the backend makes"),
        ("", False, "the FIFO name '' is not one the backend makes"),
        ("plain", False, "plain is not a FIFO"),
        ("link", False, "cannot open the FIFO link: Too many levels of symbolic links"),
    ],
)
def test_a_run_whose_fifo_cannot_be_opened_is_refused_and_serving_goes_on(
    raw: RawBackend, tmp_path: Path, name: str, fifo_write: bool, why: str
) -> None:
    (raw.control / "plain").write_text("not a FIFO\n")
    elsewhere = tmp_path / "elsewhere"
    make_fifo(elsewhere, os.getuid(), os.getgid())
    os.symlink(elsewhere, raw.control / "link")
    baseline = raw.fds()
    ran = tmp_path / "ran"
    reply = raw.run(f"touch {ran}", fifo=name, fifo_write=fifo_write)
    assert reply["error"] == why and reply.get("exit_code") is None, reply
    assert not ran.exists()
    assert raw.run("echo still serving")["stdout"] == "still serving\n"
    assert raw.fds() == baseline


def test_a_fifo_command_gets_its_own_descriptor_and_no_other(raw: RawBackend) -> None:
    read = open_reading(raw.make_fifo("mine"))
    listing = f"ls /proc/$$/fd; echo {PIPE_FD}"  # the shell's, seen by ls
    try:
        reply = raw.run(listing, fifo="mine", fifo_write=True)
        *fds, named = reply["stdout"].split()
        assert sorted(fds, key=int) == sorted(["0", "1", "2", named], key=int), reply
        assert drained(read) == b""
    finally:
        os.close(read)
    plain = raw.run(f'ls /proc/$$/fd; echo "${{{PIPE_FD_VARIABLE}-unset}}"')
    assert plain["stdout"].split() == ["0", "1", "2", "unset"], plain


def test_a_fifo_goes_to_its_own_command_only_while_others_run(raw: RawBackend) -> None:
    early = open_writing_early(raw.make_fifo("waiting"))
    try:
        waiting = raw.send_run(f'read line <&{PIPE_FD}; echo "got $line"', fifo="waiting")
        # Its command waits for a line; another one starts meanwhile, without the FIFO.
        other = raw.run(f'ls /proc/$$/fd; echo "${{{PIPE_FD_VARIABLE}-unset}}"')
        assert other["stdout"].split() == ["0", "1", "2", "unset"], other
        os.write(early, b"go\n")
        until(lambda: queued(early) == 0, "the waiting command read its line")
    finally:
        os.close(early)
    assert raw.reply(waiting)["stdout"] == "got go\n"


def test_the_supervisor_keeps_no_descriptor_once_its_command_ended(raw: RawBackend) -> None:
    baseline = raw.fds()
    path = raw.make_fifo("repeated")
    for _ in range(20):
        read = open_reading(path)
        try:
            reply = raw.run(f"echo x >&{PIPE_FD}", fifo="repeated", fifo_write=True)
            assert reply["exit_code"] == 0 and drained(read) == b"x\n", reply
        finally:
            os.close(read)
    # One that fails to start (a missing cwd) gives its FIFO back too.
    read = open_reading(path)
    try:
        failed = raw.run("true", fifo="repeated", fifo_write=True, cwd="/no/such/dir")
        assert "/no/such/dir" in failed["error"], failed
        assert drained(read) == b""
    finally:
        os.close(read)
    until(lambda: raw.fds() == baseline, "the supervisor's descriptor count back to before")


def test_hanging_up_ends_a_fifo_command_and_the_supervisor(raw: RawBackend) -> None:
    read = open_reading(raw.make_fifo("held"))
    try:
        raw.send_run(f"echo started >&{PIPE_FD}; exec sleep 60", fifo="held", fifo_write=True)
        until(lambda: queued(read) > 0, "the command started")
        raw.fifos.hang_up()
        assert raw.process.wait(timeout=20) == 0
        # Its command killed and the supervisor gone: nobody holds the FIFO's writing end.
        until(lambda: drained(read) is not None, "the FIFO's end")
    finally:
        os.close(read)


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
    before = open_fds()
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
                        assert open_fds() == with_channel
                    else:  # given up, its FIFOs closed
                        assert isinstance(reply, ChannelLost), reply
                        assert "reply" in reply.reason or "gone" in reply.reason, reply.reason
                        assert not left_open(before)
                channel.close("test over")
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            await process.aclose()
    finally:
        await fifos.aclose()
    assert not left_open(before)


# --- relay: the source's archive checked and written anew into every target ------------------

ROOTS = ("/tmp", "/home/sandbox")
MOUNTS = ("/tmp/m", "/home/sandbox/work/proj")
SLOW_CAT = textwrap.dedent(
    """
    import sys, time
    while chunk := sys.stdin.buffer.read(16384):
        sys.stdout.buffer.write(chunk)
        time.sleep(0.002)
    """
)
# As the source's tar makes it (sandboxd.docker.fork.ARCHIVE): the roots' entries, not the
# roots themselves, relative to the top.
ARCHIVE_TREE = (
    'cd "$1" && find tmp home/sandbox -mindepth 1 -maxdepth 1 -print0 | tar --null -T - -cf -'
)


def session_tree(base: Path) -> None:
    """What a session leaves in its tmpfs places: files of every mode, directories, links
    of both kinds, a FIFO, and 8 MiB of random bytes."""
    tmp, home = base / "tmp", base / "home" / "sandbox"
    (tmp / "dir" / "sub").mkdir(parents=True)
    (tmp / "empty").mkdir(mode=0o700)
    (tmp / "big").write_bytes(os.urandom(8 * 1024**2))
    (tmp / "dir" / "sub" / "note.txt").write_text("hello\n")
    (tmp / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (tmp / "run.sh").chmod(0o755)
    (tmp / "private").write_text("mine\n")
    (tmp / "private").chmod(0o600)
    os.symlink("dir/sub/note.txt", tmp / "note-link")
    os.symlink("/etc/passwd", tmp / "anywhere")  # nothing passes through it: it is kept
    os.link(tmp / "big", tmp / "big-again")
    os.mkfifo(tmp / "queue")
    home.mkdir(parents=True)
    (home / ".bashrc").write_text("alias ll='ls -l'\n")
    (home / "projects").mkdir()
    (home / "projects" / "notes").write_text("n\n")


def tree(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under `root`: its kind, its mode bits, its content (a file's digest, a
    symlink's target) and mtime, and the first entry it is a hard link of."""
    entries: dict[str, tuple[object, ...]] = {}
    first_of: dict[int, str] = {}
    paths = []
    for top, dirs, files in os.walk(root):
        paths += [Path(top, name) for name in (*dirs, *files)]
    for path in sorted(paths):
        name = str(path.relative_to(root))
        info = os.lstat(path)
        content: object = None
        mtime = None
        if stat.S_ISREG(info.st_mode):
            content = hashlib.sha256(path.read_bytes()).hexdigest()
            mtime = int(info.st_mtime)
        elif stat.S_ISLNK(info.st_mode):
            content = os.readlink(path)
        linked = first_of.setdefault(info.st_ino, name) if stat.S_ISREG(info.st_mode) else None
        entries[name] = (
            stat.S_IFMT(info.st_mode),
            stat.S_IMODE(info.st_mode),
            content,
            mtime,
            linked,
        )
    return entries


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


def extracting(into: Path, *, slowly: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """A target's tar (as sandboxd.docker.fork.EXTRACT runs it), reading from a new pipe."""
    into.mkdir()
    extract = f"tar -C {into} -p -xf -"
    if slowly:
        extract = f"{sys.executable} -c {shlex.quote(SLOW_CAT)} | {extract}"
    return target_process(["sh", "-c", extract])


def archived(path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A source whose archive is the file `path`."""
    return source_process(["cat", str(path)])


def members(archive: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as opened:
        return opened.getmembers()


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


def big_archive(tmp_path: Path) -> Path:
    """A tar archive of one 2 MiB member."""
    path = tmp_path / "big.tar"
    with tarfile.open(path, "w") as archive:
        data = os.urandom(2 * 1024**2)
        info = tarfile.TarInfo("tmp/big")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def test_every_target_gets_the_session_at_its_own_pace(tmp_path: Path) -> None:
    session = tmp_path / "session"
    session_tree(session)
    before = open_fds()
    source, source_read = source_process(["sh", "-c", ARCHIVE_TREE, "sh", str(session)])
    forks = [tmp_path / f"fork{index}" for index in range(3)]
    targets = [extracting(forks[0]), extracting(forks[1], slowly=True), extracting(forks[2])]
    kept, kept_write = target_process(["sh", "-c", f"cat > {tmp_path / 'copy.tar'}"])
    writes = [write for _, write in targets] + [kept_write]
    abort_read, abort_write = os.pipe()
    given = [source_read, *writes, abort_read]
    sent = relay(source_read, writes, abort_read, ArchiveCheck(ROOTS, MOUNTS))
    assert not [fd for fd in given if is_open(fd)], "the relay closes what it was given"
    os.close(abort_write)
    assert source.wait(timeout=20) == 0
    for process, _ in [*targets, (kept, kept_write)]:
        _, errors = process.communicate(timeout=60)
        assert process.returncode == 0, errors
    copy = (tmp_path / "copy.tar").read_bytes()
    assert sent == len(copy)
    for made in forks:
        for root in ("tmp", "home/sandbox"):
            assert tree(made / root) == tree(session / root), made
    # A canonical archive: names relative to the top, nobody's, and no root itself.
    written = members(copy)
    assert {member.name for member in written} == {
        *(str(path.relative_to(session)) for path in (session / "tmp").rglob("*")),
        *(str(path.relative_to(session)) for path in (session / "home/sandbox").rglob("*")),
    }
    assert {(m.uid, m.gid, m.uname, m.gname) for m in written} == {(0, 0, "", "")}
    assert not left_open(before)


def test_an_empty_session_is_an_empty_archive(tmp_path: Path) -> None:
    session = tmp_path / "session"
    (session / "tmp").mkdir(parents=True)
    (session / "home" / "sandbox").mkdir(parents=True)
    source, source_read = source_process(["sh", "-c", ARCHIVE_TREE, "sh", str(session)])
    sent, (copy,) = relay_archive_from(source_read, targets=1)
    assert source.wait(timeout=20) == 0
    assert sent == len(copy) and members(copy) == []


def test_a_target_that_stops_reading_fails_the_copy_and_names_its_fork(tmp_path: Path) -> None:
    before = open_fds()
    source, source_read = archived(big_archive(tmp_path))
    targets = [
        target_process(["sh", "-c", "cat >/dev/null"]),
        target_process(["head", "-c", "1000"]),
        target_process(["sh", "-c", "cat >/dev/null"]),
    ]
    abort_read, abort_write = os.pipe()
    with pytest.raises(ForkCopyError, match="fork 2 stopped taking the copy"):
        relay(source_read, [write for _, write in targets], abort_read, ArchiveCheck(ROOTS, ()))
    os.close(abort_write)
    finish(source, *(process for process, _ in targets))
    assert not left_open(before)


def test_closing_the_abort_pipe_stops_the_relay_at_once(tmp_path: Path) -> None:
    before = open_fds()
    # The source sends part of its archive, then neither sends more nor ends.
    source, source_read = source_process(
        ["sh", "-c", 'head -c 300000 "$1"; exec sleep 60', "sh", str(big_archive(tmp_path))]
    )
    copies = [tmp_path / f"copy{index}" for index in range(2)]
    targets = [target_process(["sh", "-c", f"cat > {copy}"]) for copy in copies]
    abort_read, abort_write = os.pipe()
    check = ArchiveCheck(ROOTS, ())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        relayed = pool.submit(
            relay, source_read, [write for _, write in targets], abort_read, check
        )
        until(
            lambda: all(copy.exists() and copy.stat().st_size >= 200_000 for copy in copies),
            "the archive's start relayed",
        )
        assert not relayed.done()
        stopped_at = time.monotonic()
        os.close(abort_write)
        with pytest.raises(ForkCopyError, match="the fork was stopped"):
            relayed.result(timeout=10)
        assert time.monotonic() - stopped_at < 2.0
    finish(source, *(process for process, _ in targets))
    assert not left_open(before)


@pytest.mark.parametrize("stalled", ["source", "target"])
def test_a_relay_where_no_byte_moves_fails_within_its_timeout(
    short_timeout: float, tmp_path: Path, stalled: str
) -> None:
    before = open_fds()
    archive = big_archive(tmp_path)
    if stalled == "source":  # sends part of its archive, then nothing, and never ends
        source, source_read = source_process(
            ["sh", "-c", 'head -c 5000 "$1"; exec sleep 60', "sh", str(archive)]
        )
        targets = [target_process(["sh", "-c", "cat >/dev/null"]) for _ in range(2)]
    else:  # one target never reads: its pipe fills up
        source, source_read = archived(archive)
        targets = [target_process(["sh", "-c", "cat >/dev/null"]), target_process(["sleep", "60"])]
    abort_read, abort_write = os.pipe()
    started = time.monotonic()
    with pytest.raises(ForkCopyError, match=f"moved no byte for {short_timeout:.0f} s"):
        relay(source_read, [write for _, write in targets], abort_read, ArchiveCheck(ROOTS, ()))
    assert short_timeout <= time.monotonic() - started < short_timeout + 5
    os.close(abort_write)
    finish(source, *(process for process, _ in targets))
    assert not left_open(before)


def test_a_stalled_target_fails_the_relay_within_one_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(fork, "IO_TIMEOUT_S", 2.0)
    source, source_read = archived(big_archive(tmp_path))
    target, target_write = target_process(["sleep", "60"])
    abort_read, abort_write = os.pipe()
    started = time.monotonic()
    try:
        with pytest.raises(ForkCopyError, match="moved no byte for 2 s"):
            relay(source_read, [target_write], abort_read, ArchiveCheck(ROOTS, ()))
        assert time.monotonic() - started < 3.0
    finally:
        os.close(abort_write)
        finish(source, target)


# --- what the check lets through, and what it refuses ---------------------------------------

Member = tuple[tarfile.TarInfo, bytes | None]


def entry(
    name: str,
    kind: bytes = tarfile.REGTYPE,
    *,
    data: bytes = b"",
    link: str = "",
    mode: int = 0o644,
) -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.linkname = link
    info.mtime = 1_700_000_000
    info.uid, info.gid, info.uname, info.gname = 1000, 1000, "someone", "someone"
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info, None


def directory(name: str, mode: int = 0o755) -> Member:
    return entry(name, tarfile.DIRTYPE, mode=mode)


def archive_of(*entries: Member) -> bytes:
    """A tar archive of `entries` as given: names, links and modes untouched."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for info, data in entries:
            archive.addfile(info, None if data is None else io.BytesIO(data))
    return buffer.getvalue()


def relay_archive_from(
    source_read: int,
    targets: int = 2,
    roots: Sequence[str] = ROOTS,
    mounts: Sequence[str] = MOUNTS,
) -> tuple[int, list[bytes]]:
    """Relay what `source_read` gives into `targets` pipes read by threads: the bytes sent
    to each and what each got."""
    pipes = [os.pipe() for _ in range(targets)]
    abort_read, abort_write = os.pipe()

    def take(read: int) -> bytes:
        with os.fdopen(read, "rb") as reading:
            return reading.read()

    try:
        with concurrent.futures.ThreadPoolExecutor(targets) as pool:
            taking = [pool.submit(take, read) for read, _ in pipes]
            sent = relay(
                source_read, [write for _, write in pipes], abort_read, ArchiveCheck(roots, mounts)
            )
            return sent, [taken.result(timeout=20) for taken in taking]
    finally:
        os.close(abort_write)


def relay_archive(archive: bytes, **options: Any) -> tuple[int, list[bytes]]:
    """Relay `archive` (fed by a thread; see relay_archive_from)."""
    before = open_fds()
    read, write = os.pipe()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), os.fdopen(write, "wb") as writing:
            writing.write(archive)

    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            feeding = pool.submit(feed)
            try:
                return relay_archive_from(read, **options)
            finally:
                feeding.result(timeout=20)
    finally:
        assert not left_open(before), "the relay left descriptors open"


def test_the_check_normalises_names(tmp_path: Path) -> None:
    sent, copies = relay_archive(
        archive_of(
            directory("./tmp/d"),
            entry("tmp//d/a", data=b"a"),
            entry("tmp/./d/b", data=b"b"),
            entry("/tmp/c", data=b"c"),
            entry("tmp/d/../e", data=b"e"),
            entry("./home/sandbox/.profile", data=b"p"),
            entry("tmp/h", tarfile.LNKTYPE, link="./tmp//d/a"),
            entry("tmp/mx", data=b"not the mount, beside it"),
        )
    )
    assert copies[0] == copies[1] and sent == len(copies[0])
    written = {member.name: member for member in members(copies[0])}
    assert sorted(written) == [
        "home/sandbox/.profile",
        "tmp/c",
        "tmp/d",
        "tmp/d/a",
        "tmp/d/b",
        "tmp/e",
        "tmp/h",
        "tmp/mx",
    ]
    assert written["tmp/h"].linkname == "tmp/d/a"
    into = tmp_path / "fork"
    into.mkdir()
    with tarfile.open(fileobj=io.BytesIO(copies[0]), mode="r:") as archive:
        archive.extractall(into, filter="fully_trusted")
    assert (into / "tmp/d/a").read_bytes() == b"a" and (into / "tmp/e").read_bytes() == b"e"
    assert (into / "tmp/h").stat().st_ino == (into / "tmp/d/a").stat().st_ino


def test_setuid_and_setgid_bits_are_dropped_and_the_sticky_bit_kept(tmp_path: Path) -> None:
    _, (copy, _) = relay_archive(
        archive_of(
            directory("tmp/shared", mode=0o3777),
            entry("tmp/suid", data=b"#!/bin/sh\n", mode=0o4755),
            entry("tmp/sgid", data=b"#!/bin/sh\n", mode=0o2755),
            entry("tmp/both", data=b"#!/bin/sh\n", mode=0o6777),
            entry("tmp/plain", data=b"x", mode=0o640),
        )
    )
    modes = {member.name: member.mode for member in members(copy)}
    assert modes == {
        "tmp/shared": 0o1777,
        "tmp/suid": 0o755,
        "tmp/sgid": 0o755,
        "tmp/both": 0o777,
        "tmp/plain": 0o640,
    }
    (tmp_path / "copy.tar").write_bytes(copy)
    into = tmp_path / "fork"
    into.mkdir()
    subprocess.run(["tar", "-C", str(into), "-p", "-xf", str(tmp_path / "copy.tar")], check=True)
    assert {name: stat.S_IMODE((into / name).stat().st_mode) for name in modes} == modes


REFUSED: dict[str, tuple[list[Member], str]] = {
    "a name through ..": ([entry("tmp/../etc/passwd")], "it is not inside /tmp, /home/sandbox"),
    "an absolute name outside": ([entry("/etc/passwd")], "it is not inside"),
    "a name above the top": ([entry("../outside")], "it leaves the copied directories"),
    "a name above the top through a root": ([entry("tmp/../../x")], "it leaves"),
    "a root itself": ([directory("tmp")], "it is not inside"),
    "a root itself, spelled otherwise": ([directory("./tmp/sub/..")], "it is not inside"),
    "a name that only starts like a root": ([entry("tmpx/y")], "it is not inside"),
    "a mount": ([directory("tmp/m")], "it is or holds the mounted path /tmp/m"),
    "a symlink as a mount": (
        [entry("tmp/m", tarfile.SYMTYPE, link="/etc")],
        "it is or holds the mounted path /tmp/m",
    ),
    "a member under a mount": ([entry("tmp/m/x")], "it is or holds the mounted path /tmp/m"),
    "a member under a mount, ./": ([entry("./tmp/m/x")], "the mounted path /tmp/m"),
    "a member under a mount, //": ([entry("tmp//m/x")], "the mounted path /tmp/m"),
    "a mount, /./": ([directory("tmp/./m")], "the mounted path /tmp/m"),
    "a member under a mount, via ..": (
        [entry("home/sandbox/work/x/../proj/y")],
        "the mounted path /home/sandbox/work/proj",
    ),
    "a member that holds a mount": (
        [directory("home/sandbox/work")],
        "it is or holds the mounted path /home/sandbox/work/proj",
    ),
    "a member through a relative symlink": (
        [entry("tmp/l", tarfile.SYMTYPE, link="../mnt"), entry("tmp/l/x")],
        "it passes through a link",
    ),
    "a member through an absolute symlink": (
        [entry("tmp/l", tarfile.SYMTYPE, link="/etc"), entry("tmp/l/passwd")],
        "it passes through a link",
    ),
    "a member deep through a symlink": (
        [directory("tmp/a"), entry("tmp/a/l", tarfile.SYMTYPE, link=".."), entry("tmp/a/l/b/c")],
        "it passes through a link",
    ),
    "a member through a hard link": (
        [entry("tmp/f"), entry("tmp/h", tarfile.LNKTYPE, link="tmp/f"), entry("tmp/h/x")],
        "it passes through a link",
    ),
    "a hard link to a file outside the archive": (
        [entry("tmp/h", tarfile.LNKTYPE, link="etc/passwd")],
        "it is not inside",
    ),
    "a hard link to an absolute file outside": (
        [entry("tmp/h", tarfile.LNKTYPE, link="/etc/shadow")],
        "it is not inside",
    ),
    "a hard link to a file the archive does not hold": (
        [entry("tmp/h", tarfile.LNKTYPE, link="tmp/absent")],
        "it links to no file the archive holds",
    ),
    "a hard link to a file that comes later": (
        [entry("tmp/h", tarfile.LNKTYPE, link="tmp/f"), entry("tmp/f")],
        "it links to no file the archive holds",
    ),
    "a hard link to a symlink": (
        [
            entry("tmp/s", tarfile.SYMTYPE, link="/etc/passwd"),
            entry("tmp/h", tarfile.LNKTYPE, link="tmp/s"),
        ],
        "it links to no file the archive holds",
    ),
    "a hard link to a directory": (
        [directory("tmp/d"), entry("tmp/h", tarfile.LNKTYPE, link="tmp/d")],
        "it links to no file the archive holds",
    ),
    "a hard link into a mount": (
        [entry("tmp/h", tarfile.LNKTYPE, link="tmp/m/x")],
        "the mounted path /tmp/m",
    ),
    "a duplicate name": ([entry("tmp/x"), entry("tmp/x")], "it comes twice"),
    "a duplicate name, spelled otherwise": ([entry("tmp/x"), entry("./tmp//x")], "it comes twice"),
    "a duplicate directory": ([directory("tmp/d"), directory("tmp/d/")], "it comes twice"),
    "a file replaced by a symlink": (
        [entry("tmp/x"), entry("tmp/x", tarfile.SYMTYPE, link="/etc/passwd")],
        "it comes twice",
    ),
    "a char device": ([entry("tmp/null", tarfile.CHRTYPE)], "it is a device"),
    "a block device": ([entry("tmp/disk", tarfile.BLKTYPE)], "it is a device"),
}


REFUSED_FIRST = {"a hard link to a file that comes later": "tmp/h"}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_the_check_refuses_a_member_no_fork_may_get(case: str) -> None:
    entries, why = REFUSED[case]
    # Fine members before it: the refusal comes wherever the member is.
    archive = archive_of(directory("tmp/ok"), entry("tmp/ok/file", data=b"fine"), *entries)
    # The last member, unless it is not the one refused; a directory's name is read back
    # without its trailing "/".
    refused = REFUSED_FIRST.get(case, entries[-1][0].name.rstrip("/"))
    with pytest.raises(ArchiveRefused, match="no fork gets") as raised:
        relay_archive(archive)
    message = str(raised.value)
    assert repr(refused) in message and why in message, message


def test_what_is_no_tar_archive_fails_the_copy() -> None:
    with pytest.raises(ForkCopyError, match="no tar archive") as raised:
        relay_archive(os.urandom(20_000))
    assert not isinstance(raised.value, ArchiveRefused)
