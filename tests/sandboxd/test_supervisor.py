"""The in-container supervisor, run for real on this host against the backend's channel.

Real processes and real FIFOs, made and handed over by the backend's own code; no Docker
needed (sandboxd's Docker tests run the same supervisor inside containers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import pytest

from logos.runners.capture import SAVE_LIMIT_NOTE
from logos.runners.live import LiveOutput
from sandboxd.docker.supervisor_client import (
    LIVE_PIECE_BOUND,
    LIVE_TOTAL_BOUND,
    ChannelLost,
    RunMessage,
    SupervisorChannel,
    SupervisorHello,
    SupervisorReply,
)
from sandboxd.inside.supervisor import IN_FIFO, OUT_FIFO, PROTOCOL
from tests.support.processes import processes_matching, until_gone
from tests.support.sandboxd_harness import true_message
from tests.support.supervisor_fifos import make_fifos, supervised

pytestmark = pytest.mark.anyio


@dataclass
class Running:
    channel: SupervisorChannel
    hello: SupervisorHello
    process: anyio.abc.Process
    output_dir: Path
    workdir: Path
    control: Path

    async def run(self, command: str, **overrides: object) -> SupervisorReply:
        reply = await self.run_or_lost(command, **overrides)
        assert isinstance(reply, SupervisorReply), reply
        return reply

    async def run_or_lost(self, command: str, **overrides: object) -> SupervisorReply | ChannelLost:
        fields: dict[str, object] = {
            "id": self.channel.next_id(),
            "command": command,
            "env": {},
            "cwd": str(self.workdir),
            "timeout_s": 30.0,
            "max_output_bytes": 4096,
            "max_saved_output_bytes": 1024**2,
        }
        fields.update(overrides)
        message = RunMessage.model_validate(fields)
        return await self.channel.run(message, reply_deadline_s=60)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    output_dir = tmp_path / "out"
    workdir = tmp_path / "work"
    workdir.mkdir()
    # Run it as the container does: a copy next to capture.py, standard library only, on the
    # FIFOs the backend makes.
    async with supervised(tmp_path, output_dir) as started:
        channel = started.channel
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(channel.serve)
            yield Running(
                channel, started.hello, started.process, output_dir, workdir, started.control
            )
            channel.close("test over")


async def test_the_fifos_are_gone_once_it_said_hello(running: Running) -> None:
    """No process can open them again: their ends lead only to each other."""
    assert not (running.control / IN_FIFO).exists()
    assert not (running.control / OUT_FIFO).exists()
    assert (running.hello.pid, running.hello.protocol) == (running.process.pid, PROTOCOL)
    assert (await running.run("echo on")).stdout == "on\n"


async def test_its_hello_says_what_it_finds_of_unix_sockets(running: Running) -> None:
    """No profile on this host: the supervisor no longer denies them itself, and says so (in
    a container, the profile refuses them; the Docker tests check that)."""
    assert running.hello.unix_sockets == "allowed"


async def test_reports_output_and_exit_status(running: Running) -> None:
    reply = await running.run("echo out; echo err >&2; exit 3")
    assert (reply.stdout, reply.stderr, reply.exit_code, reply.signal) == (
        "out\n",
        "err\n",
        3,
        None,
    )
    assert not reply.timed_out and reply.error is None


async def test_request_env_is_set_on_top_of_its_environment_and_stdin_is_no_tty(
    running: Running,
) -> None:
    # The backend sends the non-interactive environment in `env` (see test_backend.py).
    reply = await running.run(
        'echo "$PAGER $TERM $FOO"; pwd; [ -t 0 ] || echo no-tty',
        env={"FOO": "bar", "TERM": "xterm", "PAGER": "cat"},
    )
    assert reply.stdout == f"cat xterm bar\n{running.workdir}\nno-tty\n"


async def test_signal_death_is_reported_as_signal(running: Running) -> None:
    reply = await running.run("kill -USR1 $$")
    assert reply.signal == signal.SIGUSR1 and reply.exit_code is None


async def test_missing_workdir_is_an_error(running: Running) -> None:
    reply = await running.run("true", cwd="/definitely/not/here")
    assert reply.error is not None and "/definitely/not/here does not exist" in reply.error


async def test_a_command_too_large_to_start_says_what_to_do(running: Running) -> None:
    reply = await running.run("echo " + "x" * 200_000 + " | wc -c")
    assert reply.exit_code is None and reply.error is not None
    assert "128 KiB" in reply.error and "200013 bytes" in reply.error
    assert "smaller commands" in reply.error


async def test_timeout_kills_the_whole_process_group(running: Running, marker: str) -> None:
    started = time.monotonic()
    reply = await running.run(f"sleep {marker} & sleep 60", timeout_s=1.0)
    assert reply.timed_out and reply.signal == signal.SIGTERM and reply.exit_code is None
    assert time.monotonic() - started < 15
    await anyio.sleep(0.2)
    assert processes_matching(f"sleep {marker}") == []


async def test_timeout_escalates_to_sigkill(running: Running, marker: str) -> None:
    reply = await running.run(f"trap '' TERM; sleep {marker}", timeout_s=0.5)
    assert reply.timed_out and reply.signal == signal.SIGKILL
    assert processes_matching(f"sleep {marker}") == []


async def test_background_process_holding_stdout_does_not_block(
    running: Running, marker: str
) -> None:
    started = time.monotonic()
    reply = await running.run(f"sleep {marker} & echo hi")
    assert reply.stdout == "hi\n" and reply.exit_code == 0
    assert time.monotonic() - started < 10


async def test_flood_is_cut_and_saved(running: Running) -> None:
    total = 20 * 1024**2
    reply = await running.run(
        f"yes | head -c {total}", max_output_bytes=1000, max_saved_output_bytes=100_000
    )
    assert reply.exit_code == 0
    assert reply.stdout_dropped_bytes > total - 2000
    assert reply.stdout.startswith("y\ny\n") and "bytes omitted" in reply.stdout
    assert reply.stdout_file == f"{running.output_dir}/cmd-1.stdout"
    saved = Path(reply.stdout_file).read_bytes()
    assert saved[:100_000] == b"y\n" * 50_000
    assert saved[100_000:].decode() == SAVE_LIMIT_NOTE.format(
        unsaved=total - 100_000, saved=100_000
    )
    assert reply.stderr_file is None


async def test_concurrent_commands_are_multiplexed(running: Running) -> None:
    replies: dict[int, SupervisorReply] = {}

    async def one(index: int) -> None:
        replies[index] = await running.run(f"sleep 1.{9 - index}; echo {index}")

    started = time.monotonic()
    async with anyio.create_task_group() as tasks:
        for index in range(10):
            tasks.start_soon(one, index)
    assert {index: reply.stdout for index, reply in replies.items()} == {
        index: f"{index}\n" for index in range(10)
    }
    # Sequentially this would take 14.5 s; concurrently about 2 s.
    assert time.monotonic() - started < 12.0


async def test_cancellation_kills_the_command(running: Running, marker: str) -> None:
    with anyio.move_on_after(0.5):
        await running.run(f"sleep {marker}")
    with anyio.fail_after(10):
        await until_gone(f"sleep {marker}")
    assert (await running.run("echo still-serving")).stdout == "still-serving\n"


async def test_a_cancel_right_after_the_request_kills_the_command(
    running: Running, marker: str
) -> None:
    """A caller gone at once sends its cancel before the command's process exists."""
    for attempt in range(40):
        with anyio.move_on_after(0.0005 * attempt):
            await running.run(f"sleep {marker}")
    with anyio.fail_after(10):
        await until_gone(f"sleep {marker}")


async def test_hang_up_kills_commands_and_stops_the_supervisor(
    running: Running, marker: str
) -> None:
    async with anyio.create_task_group() as tasks:

        async def long_command() -> None:
            lost = await running.run_or_lost(f"sleep {marker}")
            assert isinstance(lost, ChannelLost) and lost.by_backend

        tasks.start_soon(long_command)
        await anyio.sleep(0.5)
        running.channel.close("closing on purpose")
    with anyio.fail_after(10):
        assert await running.process.wait() == 0
    assert processes_matching(f"sleep {marker}") == []


async def test_supervisor_death_fails_commands_in_flight(running: Running) -> None:
    lost = await running.run_or_lost(f"kill -9 {running.process.pid}; sleep 5")
    assert isinstance(lost, ChannelLost) and not lost.by_backend
    assert isinstance(await running.run_or_lost("true"), ChannelLost)


HOSTILE_REPLIES = {
    "a reply line without an end": b'{"id": 1, "stdout": "' + b"x" * (64 * 1024**2),
    "more output than the request allows": (
        b'{"id": 1, "stdout_bytes": 50000000, "stderr_bytes": 0}\n' + b"x" * 4 * 1024**2
    ),
    "a reply to a command never sent": b'{"id": 99, "stdout_bytes": 0, "stderr_bytes": 0}\n',
    "live output of a command that did not ask for it": (
        b'{"id": 1, "phase": "live", "stdout_bytes": 1, "stderr_bytes": 0}\nx'
    ),
}
_LIVE_PIECE = b'{"id": 1, "phase": "live", "stdout_bytes": %d, "stderr_bytes": 0}\n'
HOSTILE_LIVE_REPLIES = {
    "a live piece over its bound": (
        _LIVE_PIECE % (LIVE_PIECE_BOUND + 1) + b"x" * (LIVE_PIECE_BOUND + 1)
    ),
    "live pieces over the command's live limit": (
        _LIVE_PIECE % LIVE_PIECE_BOUND + b"x" * LIVE_PIECE_BOUND
    )
    * (LIVE_TOTAL_BOUND // LIVE_PIECE_BOUND + 1),
}


@pytest.mark.parametrize(
    "reply",
    [*HOSTILE_REPLIES, *HOSTILE_LIVE_REPLIES],
    ids=[*HOSTILE_REPLIES, *HOSTILE_LIVE_REPLIES],
)
async def test_a_hostile_reply_is_refused(tmp_path: Path, reply: str) -> None:
    """A compromised supervisor cannot make the backend buffer without bound, or confuse it."""
    hostile = HOSTILE_REPLIES.get(reply) or HOSTILE_LIVE_REPLIES[reply]
    fifos = make_fifos(tmp_path)

    def hostile_supervisor() -> None:
        requests = os.open(tmp_path / IN_FIFO, os.O_RDONLY)
        replies = os.open(tmp_path / OUT_FIFO, os.O_WRONLY)
        try:
            _write_all(
                replies,
                b'{"hello": "sandboxd-supervisor", "protocol": %d, "pid": 1, "shell": "x", '
                b'"mounts": [], "unix_sockets": "denied"}\n' % PROTOCOL,
            )
            os.read(requests, 4096)
            with contextlib.suppress(OSError):  # the backend hangs up on it
                _write_all(replies, hostile)
            while os.read(requests, 4096):  # until the backend hangs up
                pass
        finally:
            os.close(requests)
            os.close(replies)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, hostile_supervisor)
            with anyio.fail_after(20):
                channel, _ = await fifos.handshake()
            tasks.start_soon(channel.serve)
            message = true_message(channel, live=reply in HOSTILE_LIVE_REPLIES)
            with anyio.fail_after(20):
                lost = await channel.run(message, reply_deadline_s=15, live=LiveOutput())
            assert isinstance(lost, ChannelLost), lost
            assert (
                "reply line over" in lost.reason
                or "never sent" in lost.reason
                or "more than the" in lost.reason
                or "not asked for" in lost.reason
                or "bytes of live output" in lost.reason
            ), lost.reason
    finally:
        await fifos.aclose()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def test_the_first_reply_may_be_as_large_as_its_request_allows(running: Running) -> None:
    """The reply limit comes from the request it answers, never from an earlier one."""
    reply = await running.run(
        "head -c 3000000 /dev/zero | tr '\\0' '\\1'", max_output_bytes=4 * 1024**2
    )
    assert reply.error is None and reply.exit_code == 0
    assert reply.stdout == "\x01" * 3_000_000


async def test_a_silent_supervisor_is_given_up(running: Running) -> None:
    running.process.send_signal(signal.SIGSTOP)
    try:
        message = true_message(running.channel, cwd=str(running.workdir), timeout_s=0.1)
        with anyio.fail_after(20):
            lost = await running.channel.run(message, reply_deadline_s=1)
        assert isinstance(lost, ChannelLost) and not lost.by_backend
        assert lost.reason == "it gave no reply within 1 s"
    finally:
        running.process.send_signal(signal.SIGCONT)


async def _background(running: Running, command: str, **overrides: object) -> SupervisorReply:
    reply = await running.run(command, background_after_s=0.3, **overrides)
    assert reply.phase == "background", reply
    return reply


async def test_a_slow_command_goes_on_as_a_job_and_its_output_waits_for_a_peek(
    running: Running,
) -> None:
    started = await _background(running, "echo a; sleep 1; echo b; echo e >&2; exit 4")
    assert (started.stdout, started.exit_code, started.stdout_file is not None) == (
        "a\n",
        None,
        True,
    )
    job = started.id
    so_far = await running.channel.peek(job, since_background=True, deadline_s=10)
    assert isinstance(so_far, SupervisorReply) and so_far.running and so_far.stdout == ""
    end = await running.channel.wait_end(job, deadline_s=20)
    assert isinstance(end, SupervisorReply) and end.phase == "end"
    assert (end.exit_code, end.stdout, end.stdout_file) == (4, "", started.stdout_file)
    since = await running.channel.peek(job, since_background=True, deadline_s=10)
    whole = await running.channel.peek(job, since_background=False, deadline_s=10)
    assert isinstance(since, SupervisorReply) and isinstance(whole, SupervisorReply)
    assert (since.running, since.stdout, since.stderr) == (False, "b\n", "e\n")
    assert (whole.stdout, whole.stdout_file) == ("a\nb\n", started.stdout_file)
    assert started.stdout_file is not None
    assert Path(started.stdout_file).read_text() == "a\nb\n"
    await running.channel.forget(job)
    forgotten = await running.channel.peek(job, since_background=True, deadline_s=10)
    assert isinstance(forgotten, ChannelLost) and "not known" in forgotten.reason
    assert (await running.run("echo still fine")).stdout == "still fine\n"


async def test_a_killed_job_ends_without_an_error_and_takes_its_group(
    running: Running, marker: str
) -> None:
    started = await _background(running, f"sleep {marker} & sleep {marker}")
    await running.channel.kill(started.id)
    end = await running.channel.wait_end(started.id, deadline_s=20)
    assert isinstance(end, SupervisorReply)
    assert end.signal == signal.SIGTERM and end.error is None and not end.timed_out
    assert processes_matching(f"sleep {marker}") == []


async def test_a_job_keeps_its_timeout(running: Running, marker: str) -> None:
    started = await _background(running, f"sleep {marker}", timeout_s=1.0)
    end = await running.channel.wait_end(started.id, deadline_s=20)
    assert isinstance(end, SupervisorReply) and end.timed_out and end.duration_s >= 1.0
    assert processes_matching(f"sleep {marker}") == []
