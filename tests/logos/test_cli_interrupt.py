"""Ctrl-C and leftovers: no process survives the command, and the trajectory is complete."""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_harness import Home, PtySession, logos, make_home, openai_env, read_jsonl
from tests.support.processes import processes_matching, wait_for
from tests.support.sse_server import ScriptedServer, openai_stream


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


def unique_sleep() -> str:
    """A `sleep` whose command line no other process on the machine has."""
    return f"sleep {random.randint(100_000, 999_999)}.{random.randint(100_000, 999_999)}"


@contextlib.contextmanager
def logos_process(
    args: list[str], home: Home, env: dict[str, str], output: int, *, text: bool = False
) -> Iterator[subprocess.Popen[Any]]:
    """`logos ARGS` going on in the background, its stdout and stderr to `output`; killed on
    the way out if it is still running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "logos", *args],
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        env=env,
        cwd=home.work,
        text=text,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Interrupted:
    returncode: int
    stdout: str
    stderr: str
    marker: str
    """The command line of the `sleep` the model ran."""


def interrupt_mid_command(
    home: Home, sse_server: ScriptedServer, reply: str, args: list[str], *signals: int
) -> Interrupted:
    """Start logos, its model replying `reply` (`{sleep}`: a `sleep` of its own), and send
    `signals` once that command runs (0.3 s apart)."""
    marker = unique_sleep()
    sse_server.enqueue(openai_stream(reply.format(sleep=marker)))
    env = openai_env(home, sse_server)
    with logos_process(args, home, env, subprocess.PIPE, text=True) as proc:
        assert wait_for(lambda: processes_matching(marker)), "the command never started"
        for number, sig in enumerate(signals):
            if number:
                time.sleep(0.3)
            proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
    return Interrupted(proc.returncode, stdout, stderr, marker)


def assert_canceled_and_recorded(home: Home) -> list[dict[str, Any]]:
    """The run's trajectory ends with its summary: canceled. Returns its records."""
    records = read_jsonl(home.only_run())
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"
    return records


@pytest.mark.timeout(60)
def test_ctrl_c_mid_command_kills_it_and_keeps_the_trajectory(
    home: Home, sse_server: ScriptedServer
) -> None:
    stopped = interrupt_mid_command(
        home,
        sse_server,
        "Waiting a while.\n<cmd>{sleep}</cmd>",
        ["--model", "m", "--yes", "wait for it"],
        signal.SIGINT,
    )
    assert stopped.returncode == 130, stopped.stderr
    assert processes_matching(stopped.marker) == []
    assert "stopping" in stopped.stderr and "interrupted" in stopped.stderr.splitlines()[-1]
    assert stopped.stdout == ""
    steps = [r for r in assert_canceled_and_recorded(home) if r["type"] == "step"]
    assert steps and steps[0]["role"] == "assistant" and stopped.marker in steps[0]["content"]


@pytest.mark.timeout(60)
def test_sigterm_stops_the_run_too(home: Home, sse_server: ScriptedServer) -> None:
    stopped = interrupt_mid_command(
        home,
        sse_server,
        "<cmd>{sleep}</cmd>",
        ["--model", "m", "--yes", "--json", "wait"],
        signal.SIGTERM,
    )
    assert stopped.returncode == 128 + signal.SIGTERM
    assert processes_matching(stopped.marker) == []
    assert '"stop_reason":"canceled"' in stopped.stdout.splitlines()[-1]


@pytest.mark.timeout(60)
def test_background_jobs_are_killed_when_the_run_ends(
    home: Home, sse_server: ScriptedServer
) -> None:
    marker = unique_sleep()
    sse_server.enqueue(
        openai_stream(f"<cmd>{marker} > /dev/null 2>&1 &\necho started</cmd>"),
        openai_stream("The server is up."),
    )
    done = logos(["--model", "m", "--yes", "start a server"], home, openai_env(home, sse_server))
    assert done.returncode == 0, done.stderr
    assert processes_matching(marker) == []


@pytest.mark.timeout(60)
def test_a_second_ctrl_c_quits_and_still_leaves_nothing_running(
    home: Home, sse_server: ScriptedServer
) -> None:
    stopped = interrupt_mid_command(
        home,
        sse_server,
        "<cmd>trap '' TERM INT; {sleep}</cmd>",
        ["--model", "m", "--yes", "stubborn"],
        signal.SIGINT,
        signal.SIGINT,
    )
    assert stopped.returncode == 130, stopped.stderr
    assert processes_matching(stopped.marker) == []  # it ignored SIGTERM: it was SIGKILLed
    assert read_jsonl(home.only_run())[-1]["stop_reason"] == "canceled"


@pytest.mark.timeout(60)
def test_a_hung_up_terminal_stops_the_run_and_keeps_the_trajectory(
    home: Home, sse_server: ScriptedServer
) -> None:
    marker = unique_sleep()
    sse_server.enqueue(openai_stream(f"Waiting.\n<cmd>{marker}</cmd>"))
    terminal = PtySession(["--model", "m", "--yes", "wait"], home, openai_env(home, sse_server))
    try:
        terminal.expect(marker.split()[1])
        assert wait_for(lambda: processes_matching(marker)), "the command never started"
        terminal.hang_up()
        assert terminal.proc.wait(timeout=30) == 128 + signal.SIGHUP
    finally:
        terminal.close()
    assert processes_matching(marker) == []
    assert_canceled_and_recorded(home)


@pytest.mark.timeout(60)
def test_json_readers_that_leave_early_stop_the_run_cleanly(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("word " * 200, chunk_size=5, event_pause_s=0.05))
    args = ["--model", "m", "--yes", "--json", "talk"]
    with logos_process(args, home, openai_env(home, sse_server), subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert b'"type":"start"' in proc.stdout.readline()
        proc.stdout.close()  # like `logos --json … | head -1`
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=30) == 128 + signal.SIGPIPE, stderr
    assert "Traceback" not in stderr and "stdout" in stderr
    assert_canceled_and_recorded(home)


@pytest.mark.timeout(60)
def test_a_run_still_going_cannot_be_resumed_at_the_same_time(
    home: Home, sse_server: ScriptedServer
) -> None:
    marker = unique_sleep()
    sse_server.enqueue(openai_stream(f"<cmd>{marker}</cmd>"))
    env = openai_env(home, sse_server)
    args = ["--model", "m", "--yes", "first"]
    with logos_process(args, home, env, subprocess.DEVNULL) as proc:
        assert wait_for(lambda: processes_matching(marker)), "the command never started"
        path = home.only_run()
        before = path.read_bytes()
        second = logos(["resume", str(path), "meanwhile", "--yes"], home, env)
        assert second.returncode == 2
        assert "still going" in second.stderr and str(path) in second.stderr
        assert path.read_bytes() == before  # nothing appended, nothing cut off
        assert len(sse_server.requests) == 1  # refused before the model was called
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    assert read_jsonl(path)[-1]["stop_reason"] == "canceled"
