"""Ctrl-C and leftovers: no process survives the command, and the trajectory is complete."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from dataclasses import dataclass

import pytest

from tests.support.cli_harness import (
    Home,
    PtySession,
    logos,
    openai_env,
    read_jsonl,
    run_task,
    running_logos,
)
from tests.support.processes import interrupt, processes_matching, wait_for
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(60)


def unique_sleep() -> str:
    """A `sleep` whose command line no other process on the machine has."""
    return f"sleep {random.randint(100_000, 999_999)}.{random.randint(100_000, 999_999)}"


@dataclass(frozen=True)
class Interrupted:
    """A run stopped by signals while its command (`marker`, a unique sleep) ran."""

    marker: str
    returncode: int
    stdout: str
    stderr: str


def interrupt_mid_command(
    home: Home, sse_server: ScriptedServer, reply: str, args: list[str], *signals: int
) -> Interrupted:
    """Start `logos --model m --yes ARGS` on a model that replies `reply` (its `{marker}`
    becomes a unique sleep) and send `signals` once that command runs (0.3 s apart)."""
    marker = unique_sleep()
    sse_server.enqueue(openai_stream(reply.format(marker=marker)))
    env = openai_env(home, sse_server)
    with running_logos(["--model", "m", "--yes", *args], home, env) as proc:
        assert wait_for(lambda: processes_matching(marker)), "the command never started"
        stdout, stderr = interrupt(proc, *signals, timeout=30)
    return Interrupted(marker, proc.returncode, stdout, stderr)


def test_ctrl_c_mid_command_kills_it_and_keeps_the_trajectory(
    home: Home, sse_server: ScriptedServer
) -> None:
    reply = "Waiting a while.\n<cmd>{marker}</cmd>"
    run = interrupt_mid_command(home, sse_server, reply, ["wait for it"], signal.SIGINT)
    assert run.returncode == 130, run.stderr
    assert processes_matching(run.marker) == []
    assert "stopping" in run.stderr and "interrupted" in run.stderr.splitlines()[-1]
    assert run.stdout == ""
    records = home.run_records()
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"
    steps = [r for r in records if r["type"] == "step"]
    assert steps and steps[0]["role"] == "assistant" and run.marker in steps[0]["content"]


def test_sigterm_stops_the_run_too(home: Home, sse_server: ScriptedServer) -> None:
    reply = "<cmd>{marker}</cmd>"
    run = interrupt_mid_command(home, sse_server, reply, ["--json", "wait"], signal.SIGTERM)
    assert run.returncode == 128 + signal.SIGTERM
    assert processes_matching(run.marker) == []
    assert '"stop_reason":"canceled"' in run.stdout.splitlines()[-1]


def test_background_jobs_are_killed_when_the_run_ends(
    home: Home, sse_server: ScriptedServer
) -> None:
    marker = unique_sleep()
    sse_server.enqueue(
        openai_stream(f"<cmd>{marker} > /dev/null 2>&1 &\necho started</cmd>"),
        openai_stream("The server is up."),
    )
    done = run_task(home, sse_server, "start a server")
    assert done.returncode == 0, done.stderr
    assert processes_matching(marker) == []


def test_a_second_ctrl_c_quits_and_still_leaves_nothing_running(
    home: Home, sse_server: ScriptedServer
) -> None:
    reply = "<cmd>trap '' TERM INT; {marker}</cmd>"
    sigints = (signal.SIGINT, signal.SIGINT)
    run = interrupt_mid_command(home, sse_server, reply, ["stubborn"], *sigints)
    assert run.returncode == 130, run.stderr
    assert processes_matching(run.marker) == []  # it ignored SIGTERM: it was SIGKILLed
    assert home.run_records()[-1]["stop_reason"] == "canceled"


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
    records = home.run_records()
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"


def test_json_readers_that_leave_early_stop_the_run_cleanly(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("word " * 200, chunk_size=5, event_pause_s=0.05))
    proc = subprocess.Popen(
        [sys.executable, "-m", "logos", "--model", "m", "--yes", "--json", "talk"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=openai_env(home, sse_server),
        cwd=home.work,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert b'"type":"start"' in proc.stdout.readline()
        proc.stdout.close()  # like `logos --json … | head -1`
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=30) == 128 + signal.SIGPIPE, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in stderr and "stdout" in stderr
    records = home.run_records()
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"


def test_a_run_still_going_cannot_be_resumed_at_the_same_time(
    home: Home, sse_server: ScriptedServer
) -> None:
    marker = unique_sleep()
    sse_server.enqueue(openai_stream(f"<cmd>{marker}</cmd>"))
    env = openai_env(home, sse_server)
    proc = subprocess.Popen(
        [sys.executable, "-m", "logos", "--model", "m", "--yes", "first"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=home.work,
    )
    try:
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
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert read_jsonl(path)[-1]["stop_reason"] == "canceled"
