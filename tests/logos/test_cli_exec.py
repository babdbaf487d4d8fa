"""`logos exec`: one message's blocks run, the envelope printed, the exit status says how."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest

from logos.protocol.envelope import format_results
from logos.result import Result
from tests.support.cli_harness import Home, PtySession, logos
from tests.support.processes import processes_matching

MESSAGE = """I will check two things.
<cmd>echo alpha</cmd>
<cmd>printf beta</cmd>
Then I decide."""


@pytest.mark.timeout(60)
def test_exec_prints_the_envelope_and_exits_0_when_all_succeed(home: Home) -> None:
    done = logos(["exec", "--yes"], home, home.env(), stdin=MESSAGE)
    assert done.returncode == 0, done.stderr
    expected = format_results(
        [Result("echo alpha", stdout="alpha\n"), Result("printf beta", stdout="beta")]
    )
    assert done.stdout == expected + "\n"
    assert [(a["action"], a["command"]) for a in home.audit()] == [
        ("auto", "echo alpha"),
        ("auto", "printf beta"),
    ]
    assert home.audit()[0]["trajectory"] is None


@pytest.mark.timeout(60)
def test_exec_exits_1_when_a_block_fails_or_is_refused(home: Home) -> None:
    (home.work / "notes.txt").write_text("a\n")
    message = "<cmd>exit 4</cmd><cmd>sed -i s/a/b/ notes.txt</cmd><cmd>pwd</cmd>"
    done = logos(["exec", "--yes"], home, home.env(), stdin=message)
    assert done.returncode == 1
    assert "exit code 4" in done.stdout
    assert "sed -i" in done.stdout and "error:" in done.stdout  # the policy refused it
    assert (home.work / "notes.txt").read_text() == "a\n"
    assert f"<stdout>\n{home.work}\n</stdout>" in done.stdout  # runs in the current directory


def test_exec_runs_nothing_locally_without_yes(home: Home) -> None:
    done = logos(["exec"], home, home.env(), stdin="<cmd>touch made</cmd>")
    assert done.returncode == 2
    assert "--yes" in done.stderr and "--sandbox" in done.stderr
    assert not (home.work / "made").exists()


def test_exec_never_run_is_a_dry_run(home: Home) -> None:
    done = logos(
        ["exec", "--approve", "never-run"], home, home.env(), stdin="<cmd>touch made</cmd>"
    )
    assert done.returncode == 1
    assert "error: not run: approval mode never-run" in done.stdout
    assert not (home.work / "made").exists()


def test_a_message_without_blocks_prints_nothing(home: Home) -> None:
    done = logos(["exec", "--yes"], home, home.env(), stdin="All done, no commands.")
    assert done.returncode == 0 and done.stdout == ""
    assert "no <cmd> blocks" in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_kills_the_running_commands(home: Home, stop: signal.Signals) -> None:
    marker = f"sleep {random.randint(100_000, 999_999)}.{random.randint(100_000, 999_999)}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "logos", "exec", "--yes"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=home.env(),
        cwd=home.work,
        text=True,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(f"<cmd>{marker}</cmd>")
        proc.stdin.close()
        deadline = time.monotonic() + 20
        while not processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_matching(marker), "the command never started"
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == 128 + stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert processes_matching(marker) == []


def test_an_unclosed_block_is_reported_not_dropped(home: Home) -> None:
    done = logos(["exec", "--yes"], home, home.env(), stdin="<cmd>echo ran</cmd>\n<cmd>echo cut")
    assert done.returncode == 1
    assert "ran\n" in done.stdout and "echo cut" not in done.stdout
    assert "unclosed <cmd> block" in done.stderr and "was not run" in done.stderr
    alone = logos(["exec", "--yes"], home, home.env(), stdin="<cmd>echo cut")
    assert alone.returncode == 1 and alone.stdout == ""
    assert "unclosed <cmd> block" in alone.stderr


def test_exec_help_offers_only_its_own_approval_modes(home: Home) -> None:
    shown = logos(["exec", "--help"], home, home.env())
    assert shown.returncode == 0
    approval = shown.stdout[shown.stdout.index("\napproval:") :]
    assert "confirm" not in approval


@pytest.mark.timeout(60)
def test_exec_on_a_terminal_says_how_to_end_the_message(home: Home) -> None:
    terminal = PtySession(["exec", "--yes"], home, home.env())
    try:
        terminal.expect("Ctrl-D")
        terminal.send("<cmd>echo typed</cmd>\n\x04")
        terminal.expect(r"<stdout>\ntyped\n</stdout>")
        assert terminal.wait() == 0
    finally:
        terminal.close()
