"""Attack: leave a process running on the host after the program that ran the command is gone.

A command may start a background process (`server &`) that later commands of the same runner
talk to; it must not outlive the program that created the runner, however that program ends:
a normal exit without closing the runner (the README's library example), an unhandled
exception, SIGTERM, or SIGKILL, when no hook of the program runs at all.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from logos import LocalRunner, execute_blocks_sync
from logos.runners.group_reaper import Watchdog
from tests.support.processes import processes_matching

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 10.0

PROGRAM = textwrap.dedent(
    """
    import os, sys, time
    from logos import ExecOptions, LocalRunner, execute_blocks_sync

    how, background = sys.argv[1:]
    command = f"{background} > /dev/null 2>&1 & kill -0 $! && echo started"
    if how == "dropped":  # as the README's example used to: never named, never closed
        results = execute_blocks_sync([command], LocalRunner(), ExecOptions(timeout_s=30))
    else:
        runner = LocalRunner()
        results = execute_blocks_sync([command], runner, ExecOptions(timeout_s=30))
    print(results[0].stdout.strip(), flush=True)
    if how == "raises":
        raise RuntimeError("an unhandled error after the command")
    if how == "waits":
        time.sleep(600)  # until the test signals it
    """
)


def _start_program(
    how: str, marker: str, background: str = "sleep {marker}"
) -> subprocess.Popen[str]:
    program = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, how, background.format(marker=marker)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert program.stdout is not None
    assert program.stdout.readline().strip() == "started"
    return program


def _left_after(marker: str, timeout_s: float = GONE_WITHIN_S) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := processes_matching(f"sleep {marker}")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize("how", ["exits", "dropped", "raises"])
def test_a_background_process_dies_with_a_program_that_never_closed_its_runner(
    how: str, marker: str
) -> None:
    program = _start_program(how, marker)
    assert program.wait(timeout=60) == (1 if how == "raises" else 0)
    assert _left_after(marker) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_background_process_dies_with_a_program_killed_by_a_signal(
    sig: signal.Signals, marker: str
) -> None:
    program = _start_program("waits", marker)
    program.send_signal(sig)
    assert program.wait(timeout=60) == -sig
    assert _left_after(marker) == []


def test_a_background_process_that_ignores_sigterm_is_killed_after_the_grace(marker: str) -> None:
    program = _start_program("waits", marker, "(trap '' TERM; exec sleep {marker})")
    program.kill()
    assert program.wait(timeout=60) == -signal.SIGKILL
    assert _left_after(marker) == []


def test_a_background_process_lives_on_for_the_runners_later_commands(marker: str) -> None:
    with LocalRunner() as runner:
        execute_blocks_sync([f"sleep {marker} > /dev/null 2>&1 &"], runner)
        [later] = execute_blocks_sync(["echo later"], runner)  # in a new event loop, too
        assert later.stdout == "later\n" and processes_matching(f"sleep {marker}")
    # Closing the runner (here by its sync context manager) kills it before returning.
    assert processes_matching(f"sleep {marker}") == []


CHILDREN = textwrap.dedent(
    """
    import os
    from logos import ExecOptions, LocalRunner, execute_blocks_sync

    def children():
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append(entry)
        return len(found)

    runner = LocalRunner()
    execute_blocks_sync(["echo quiet; sleep 0.1 & wait"], runner)
    print(children())
    execute_blocks_sync(["sleep {marker} > /dev/null 2>&1 &"], runner)
    print(children())
    """
)


def test_the_watchdog_is_started_only_once_a_command_leaves_a_process_behind(
    marker: str,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILDREN.replace("{marker}", marker)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["0", "1"]
    assert _left_after(marker) == []


def test_the_watchdog_never_signals_a_group_that_is_not_its_own_session(marker: str) -> None:
    # Once a runner's group has ended, its id may be reused by an unrelated process group;
    # the runner's groups lead their own session (start_new_session), that one does not.
    unrelated = subprocess.Popen(["sleep", marker], process_group=0)
    own_session = subprocess.Popen(["sleep", marker], start_new_session=True)
    try:
        watchdog = Watchdog.start({unrelated.pid, own_session.pid})
        watchdog.release()  # as when the program dies: it kills what it was told of
        assert own_session.wait(timeout=GONE_WITHIN_S) == -signal.SIGTERM
        assert watchdog.wait(timeout_s=GONE_WITHIN_S)
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        own_session.kill()
        unrelated.wait()
        own_session.wait()


JOB_PROGRAM = textwrap.dedent(
    """
    import sys, time
    from logos import ExecOptions, LocalRunner, execute_blocks_sync

    how, marker = sys.argv[1:]
    runner = LocalRunner()
    options = ExecOptions(timeout_s=600, background_after_s=0.2)
    [result] = execute_blocks_sync([f"sleep {marker}"], runner, options)
    print("started" if result.job is not None else f"not a job: {result}", flush=True)
    sys.stdin.readline()  # WHY: the test sees the job running first, then lets it go on
    if how == "waits":
        time.sleep(600)  # until the test kills it
    """
)


@pytest.mark.parametrize("how", ["exits", "killed"])
def test_a_job_dies_with_its_program(how: str, marker: str) -> None:
    program = subprocess.Popen(
        [sys.executable, "-c", JOB_PROGRAM, "waits" if how == "killed" else how, marker],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert program.stdin is not None and program.stdout is not None
    assert program.stdout.readline().strip() == "started"
    assert processes_matching(f"sleep {marker}")
    program.stdin.close()  # the program goes on: it exits, or waits to be killed
    if how == "killed":
        program.kill()
    program.wait(timeout=60)
    assert _left_after(marker) == []
