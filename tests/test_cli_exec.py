"""`logos exec`: one message's blocks run, the envelope printed, the exit status says how."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos.envelope import format_results
from logos.result import Result
from tests.cli_harness import Home, logos, make_home

MESSAGE = """I will check two things.
<cmd>echo alpha</cmd>
<cmd>printf beta</cmd>
Then I decide."""


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


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
