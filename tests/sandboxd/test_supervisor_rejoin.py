"""The supervisor outliving its backend: jobs go on, a daemon that knows its secret reaches it
again through new FIFOs, and without one it ends everything after its wait.

Real processes and real FIFOs on this host, made by the backend's own code (the Docker tests
do the same with a killed daemon and a container).
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from sandboxd.docker.container import REJOIN_DIR_MODE
from sandboxd.docker.supervisor_client import (
    ChannelFifos,
    ChannelLost,
    RunMessage,
    SupervisorChannel,
    SupervisorHello,
    SupervisorReply,
)
from sandboxd.inside.supervisor import (
    ORPHANED_EXIT,
    REJOIN_DIR,
    rejoin_names,
)
from tests.support.processes import processes_matching, until_gone
from tests.support.supervisor_fifos import Supervised, supervised

pytestmark = pytest.mark.anyio


def _message(channel: SupervisorChannel, command: str, **fields: object) -> RunMessage:
    defaults: dict[str, object] = {
        "command": command,
        "env": {},
        "cwd": "/",
        "timeout_s": 60.0,
        "max_output_bytes": 4096,
        "max_saved_output_bytes": 1024**2,
    }
    return RunMessage(id=channel.next_id(), **{**defaults, **fields})


async def _job(channel: SupervisorChannel, command: str) -> SupervisorReply:
    reply = await channel.run(_message(channel, command, background_after_s=0.2), 30)
    assert isinstance(reply, SupervisorReply) and reply.phase == "background", reply
    return reply


@dataclass
class Orphaned:
    """A supervisor whose backend hung up, with what it ran before."""

    started: Supervised
    job: SupervisorReply
    """Still running: it prints a line every 0.2 s for 3 s."""
    ended: SupervisorReply
    """Ends 0.5 s after the hang-up."""
    foreground: ChannelLost


@pytest.fixture
async def orphaned(tmp_path: Path, marker: str) -> AsyncIterator[Orphaned]:
    async with supervised(tmp_path, tmp_path / "out", orphan_ttl_s=30) as started:
        channel = started.channel
        assert started.hello.secret is not None and len(started.hello.secret) == 64
        lost: list[SupervisorReply | ChannelLost] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(channel.serve)
            job = await _job(channel, "for i in $(seq 15); do echo tick $i; sleep 0.2; done")
            ended = await _job(channel, "echo early; sleep 0.7; echo late; exit 3")

            async def foreground() -> None:
                lost.append(await channel.run(_message(channel, f"sleep {marker}"), 60))

            tasks.start_soon(foreground)
            while not processes_matching(f"sleep {marker}"):
                await anyio.sleep(0.05)
            channel.close("the daemon went away")
        await channel.aclose()
        assert isinstance(lost[0], ChannelLost)
        yield Orphaned(started, job, ended, lost[0])


async def _rejoin(orphaned: Orphaned) -> tuple[SupervisorChannel, SupervisorHello]:
    secret = orphaned.started.hello.secret
    assert secret is not None
    fifos = ChannelFifos.rejoin(orphaned.started.control, secret, os.getuid(), os.getgid())
    with anyio.fail_after(10):
        return await fifos.handshake()


async def test_commands_nobody_waits_for_are_killed_and_jobs_go_on(
    orphaned: Orphaned, marker: str
) -> None:
    with anyio.fail_after(10):
        await until_gone(f"sleep {marker}")
    assert orphaned.started.process.returncode is None
    assert processes_matching("echo tick"), "the job was killed with the channel"


async def test_a_daemon_with_the_secret_takes_the_jobs_over_with_what_they_printed_meanwhile(
    orphaned: Orphaned,
) -> None:
    await anyio.sleep(1.0)  # the second job ends while no daemon is there
    channel, hello = await _rejoin(orphaned)
    rejoin_dir = orphaned.started.control / REJOIN_DIR
    assert not any(rejoin_dir.iterdir()), "the new channel's FIFOs stay behind"
    assert hello.rejoined and hello.pid == orphaned.started.process.pid
    held = {job.id: job for job in hello.jobs}
    assert set(held) == {orphaned.job.id, orphaned.ended.id}, hello.jobs
    assert held[orphaned.job.id].end is None
    end = held[orphaned.ended.id].end
    assert end is not None and end.exit_code == 3 and end.error is None
    assert hello.last_id >= orphaned.ended.id + 1  # the foreground command's id too
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(channel.serve)
        ended_output = await channel.peek(orphaned.ended.id, since_background=True, deadline_s=10)
        assert isinstance(ended_output, SupervisorReply), ended_output
        assert (ended_output.running, ended_output.stdout) == (False, "late\n")
        finished = await channel.wait_end(orphaned.job.id, deadline_s=30)
        assert isinstance(finished, SupervisorReply) and finished.exit_code == 0, finished
        whole = await channel.peek(orphaned.job.id, since_background=False, deadline_s=10)
        assert isinstance(whole, SupervisorReply)
        assert whole.stdout == "".join(f"tick {i}\n" for i in range(1, 16))
        again = await channel.run(_message(channel, "echo served"), 30)
        assert isinstance(again, SupervisorReply) and again.stdout == "served\n"
        assert again.id > hello.last_id
        channel.close("test over")


async def test_the_rejoin_directory_can_be_searched_never_listed(orphaned: Orphaned) -> None:
    info = (orphaned.started.control / REJOIN_DIR).stat()
    assert stat.S_IMODE(info.st_mode) == REJOIN_DIR_MODE == 0o311


async def test_fifos_made_without_the_secret_are_not_taken(orphaned: Orphaned) -> None:
    """Another daemon (another state directory) guessing wrong reaches nothing; whoever
    finds the right names but holds no secret cannot pass for the supervisor either."""
    wrong = ChannelFifos.rejoin(orphaned.started.control, "0" * 64, os.getuid(), os.getgid())
    with anyio.move_on_after(1.0) as waited:
        await wrong.handshake()
    assert waited.cancelled_caught
    rejoin_dir = orphaned.started.control / REJOIN_DIR
    assert not any((rejoin_dir / name).exists() for name in rejoin_names("0" * 64))
    channel, hello = await _rejoin(orphaned)  # the right daemon still gets through
    assert hello.rejoined
    await channel.aclose()


async def test_with_no_daemon_back_in_time_it_ends_everything(tmp_path: Path, marker: str) -> None:
    async with supervised(tmp_path, tmp_path / "out", orphan_ttl_s=1.0) as started:
        channel = started.channel
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(channel.serve)
            await _job(channel, f"sleep {marker}")
            channel.close("the daemon went away")
        await channel.aclose()
        with anyio.fail_after(15):
            assert await started.process.wait() == ORPHANED_EXIT
    assert processes_matching(f"sleep {marker}") == []
