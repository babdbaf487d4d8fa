"""What a project's manifest says it does, and the check that holds an answer to "what does
this project do?" to it."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.project_description import ProjectDescription
from logos.agent.checks.reply import Reply
from logos.protocol.notices import project_description_note, project_description_notice
from logos.protocol.project_description import Description, asks_what_it_does, described
from tests.support.checks import ran, run_state

WHAT = "what does this project do?"
CARGO = ran(
    "head -n 40 Cargo.toml",
    '[package]\nname = "tempconv"\nversion = "1.1.0"\nedition = "2021"\n'
    'description = "Converts temperatures between Celsius and Fahrenheit"\n\n[dependencies]\n',
)
TEMPERATURES = Description("Converts temperatures between Celsius and Fahrenheit", "Cargo.toml")
QUOTES = Description("Prints a random quote from a local collection", "pyproject.toml")


@pytest.mark.parametrize(
    ("task", "asks"),
    [
        (WHAT, True),
        ("what does this repository do? answer in three bullet points", True),
        ("What is this library for?", True),
        ("what is this project written in?", False),
        ("what is the project's license?", False),
        ("how do I run the tests of this project?", False),
        ("what changed in the last commit?", False),
    ],
)
def test_a_question_of_what_the_project_does(task: str, asks: bool) -> None:
    assert asks_what_it_does(task) is asks


@pytest.mark.parametrize(
    ("command", "stdout", "text"),
    [
        (CARGO.command, CARGO.stdout, TEMPERATURES.text),
        (
            "head -n 40 pyproject.toml",
            '[project]\nname = "quotecli"\ndescription = "Prints a random quote from a local '
            'collection"\n',
            QUOTES.text,
        ),
        (
            "cat package.json",
            '{\n  "name": "short",\n  "description": "Shortens URLs"\n}\n',
            "Shortens URLs",
        ),
        (
            "cat setup.cfg",
            "[metadata]\nname = x\ndescription = Reads CSV columns\n",
            "Reads CSV columns",
        ),
    ],
)
def test_each_manifest_gives_its_description(command: str, stdout: str, text: str) -> None:
    found = described(WHAT, [ran("ls", "src\n"), ran(command, stdout)])
    assert found is not None and found.text == text


def test_no_description_from_another_file_a_failed_read_or_another_question() -> None:
    assert described(WHAT, [ran("cat notes.txt", CARGO.stdout)]) is None
    assert described(WHAT, [ran(CARGO.command, CARGO.stdout, exit_code=1)]) is None
    assert described("what is this project written in?", [CARGO]) is None
    assert described(WHAT, [ran("cat Cargo.toml", '[package]\nname = "x"\n')]) is None


def test_a_long_description_is_cut() -> None:
    found = described(WHAT, [ran("cat setup.cfg", "description = " + "word " * 200)])
    assert found is not None and len(found.text) == 301 and found.text.endswith("…")


@pytest.mark.parametrize(
    ("description", "answer", "affirmed"),
    [
        (TEMPERATURES, "It converts temperatures between Celsius and Fahrenheit.", True),
        (TEMPERATURES, "A Rust crate for temperature conversion (Celsius, Fahrenheit).", True),
        # What the default model answered, reading Cargo.toml:
        (
            TEMPERATURES,
            "The project does not perform any conversion between Celsius and Fahrenheit.",
            False,
        ),
        (QUOTES, "A command-line tool that prints random quotes from a local collection.", True),
        # What it answered reading pyproject.toml:
        (
            QUOTES,
            "This repository is a Python project that uses the `click` library to "
            "create a command-line tool named `quotecli`.",
            False,
        ),
        (QUOTES, "It has no README. It prints a random quote.", True),
    ],
)
def test_an_answer_gives_the_description_unless_it_denies_it(
    description: Description, answer: str, affirmed: bool
) -> None:
    assert description.affirmed_in(answer) is affirmed


@pytest.mark.anyio
async def test_an_answer_without_the_description_is_asked_once_more_told_it() -> None:
    check = ProjectDescription()
    run = run_state(task=WHAT, results=[ran("ls", "Cargo.toml\nsrc\n"), CARGO])
    wrong = Reply(answer="The project does not perform any conversion.")
    with pytest.raises(AskAgain) as asked:
        await check.check(wrong, run)
    assert asked.value.notice == project_description_notice(TEMPERATURES)
    assert "Celsius" not in project_description_notice(TEMPERATURES)
    note = project_description_note(TEMPERATURES)
    assert note == (
        'Its authors describe the project in Cargo.toml: "Converts temperatures between Celsius '
        'and Fahrenheit". Say what the project does in those words.'
    )
    assert run.answer_due and run.answer_notes == [note]
    assert await check.check(wrong, run) is None  # the answer given then stands


@pytest.mark.anyio
async def test_a_right_answer_another_question_or_the_last_turn_passes() -> None:
    right = Reply(answer="It converts temperatures between Celsius and Fahrenheit.")
    assert await ProjectDescription().check(right, run_state(task=WHAT, results=[CARGO])) is None
    wrong = Reply(answer="A web app.")
    other = run_state(task="what is this project written in?", results=[CARGO])
    assert await ProjectDescription().check(wrong, other) is None
    last = run_state(task=WHAT, results=[CARGO], last_turn=True)
    assert await ProjectDescription().check(wrong, last) is None
