"""The command a project's files give for a how-to question, and the check that asks an
answer naming none of them once more."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.project_commands import ProjectCommands
from logos.agent.checks.reply import Reply
from logos.protocol.notices import project_commands_note, project_commands_notice
from logos.protocol.project_commands import ProjectCommand, asked_purpose, commands_for
from logos.result import Result
from tests.support.checks import ran, run_state

TESTS = "how do I run the tests of this project?"
MAKEFILE = ran(
    "head -n 40 Makefile",
    "CC = cc\nCFLAGS := -Wall\n\nringbuf: ringbuf.c main.c\n\t$(CC) -o ringbuf ringbuf.c\n\n"
    "test: ringbuf_test\n\t./ringbuf_test\n\n.PHONY: test\n",
)
PACKAGE_JSON = ran(
    "cat package.json",
    '{\n  "name": "shortener",\n  "scripts": {\n    "start": "node server.js",\n'
    '    "test": "jest"\n  },\n  "dependencies": {"express": "^4.19.0"}\n}\n',
)
CARGO = ran("head -n 40 Cargo.toml", '[package]\nname = "tempconv"\nedition = "2021"\n')
GO_MOD = ran("cat go.mod", "module example.com/pingmon\n\ngo 1.22\n")
PYPROJECT = ran(
    "head -n 40 pyproject.toml",
    '[project]\nname = "quotecli"\n\n[project.scripts]\nquote = "quotecli.cli:main"\n\n'
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
)


@pytest.mark.parametrize(
    ("task", "purpose"),
    [
        (TESTS, "test"),
        ("How can I build it?", "build"),
        ("how do I install this tool?", "install"),
        ("how do I start the server?", "run"),
        ("which command runs the test suite?", "test"),
        ("what does this repository do?", None),
        ("run the tests", None),  # a task to do, not a question of how
        ("how many tests are in tests/?", None),
    ],
)
def test_a_how_to_question_asks_for_one_purpose(task: str, purpose: str | None) -> None:
    assert asked_purpose(task) == purpose


@pytest.mark.parametrize(
    ("task", "read", "commands"),
    [
        (TESTS, MAKEFILE, ["make test"]),
        ("how do I build it?", MAKEFILE, []),  # no build or all target: make has no default here
        (TESTS, PACKAGE_JSON, ["npm test"]),
        ("how do I start it?", PACKAGE_JSON, ["npm start"]),
        (TESTS, CARGO, ["cargo test"]),
        ("how do I run it?", CARGO, ["cargo run"]),
        (TESTS, GO_MOD, ["go test ./..."]),
        (TESTS, PYPROJECT, ["pytest"]),
        ("how do I run this tool?", PYPROJECT, ["quote"]),
        ("how do I install it?", PYPROJECT, ["pip install ."]),
    ],
)
def test_each_manifest_gives_its_command(task: str, read: Result, commands: list[str]) -> None:
    assert [c.command for c in commands_for(task, [read])] == commands


def test_only_files_a_command_read_and_printed_count() -> None:
    missed = ran("head -n 40 Makefile", "", exit_code=1)
    listing = ran("ls", "Makefile\nmain.c\n")
    assert commands_for(TESTS, [missed, listing]) == ()
    assert commands_for("what does this do?", [MAKEFILE]) == ()
    both = commands_for(TESTS, [MAKEFILE, PYPROJECT, MAKEFILE])
    assert [c.command for c in both] == ["make test", "pytest"]


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ("Run `go test ./...`.", True),
        ("Run go test in the project's directory.", True),
        ("Use the go tool.", False),
        ("You can run the tests with `go   test`", True),
        ("run gotest", False),
    ],
)
def test_an_answer_names_a_command_by_its_first_words(answer: str, named: bool) -> None:
    assert ProjectCommand("go test ./...", "go.mod").named_in(answer) is named


@pytest.mark.anyio
async def test_an_answer_without_the_command_is_asked_once_more_with_it() -> None:
    check = ProjectCommands()
    run = run_state(task=TESTS, results=[ran("ls", "Makefile\n"), MAKEFILE])
    vague = Reply(answer="To run the tests, you need to execute the `test` command.")
    with pytest.raises(AskAgain) as asked:
        await check.check(vague, run)
    given = commands_for(TESTS, [MAKEFILE])
    assert asked.value.notice == project_commands_notice(given)
    assert "make test" not in project_commands_notice(given)
    note = project_commands_note(given)
    assert note == (
        "The project's own files give the command for this: `make test` (the Makefile's test "
        "target). Answer with it."
    )
    assert run.answer_due and run.answer_notes == [note]
    assert await check.check(vague, run) is None  # the answer given then stands


@pytest.mark.anyio
async def test_an_answer_with_the_command_or_another_question_passes() -> None:
    run = run_state(task=TESTS, results=[MAKEFILE])
    assert await ProjectCommands().check(Reply(answer="Run `make test`."), run) is None
    other = run_state(task="what does this project do?", results=[MAKEFILE])
    assert await ProjectCommands().check(Reply(answer="A ring buffer in C."), other) is None
