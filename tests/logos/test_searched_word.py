"""A task that asks which file holds a word: the word, where to look, the search that answers
it, and whether a command searched for it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from logos.protocol.searched_word import search_for, sought_word
from logos.result import Result


@pytest.mark.parametrize(
    ("task", "command"),
    [
        ("Which file in the notes directory contains the word TODO?", "grep -rl TODO notes"),
        (
            "Which of the .txt files in this directory mentions the word banana?",
            "grep -l banana *.txt",
        ),
        (
            "Which file in the recipes directory mentions cinnamon? Answer with just the name.",
            "grep -rl cinnamon recipes",
        ),
        (
            "Find the file under src that defines format_price and copy it to backup.py.",
            "grep -rn format_price src",
        ),
        ("Which file under src defines the function parse_date?", "grep -rn parse_date src"),
        ("What file contains 'hello world'?", "grep -rl --exclude-dir=.git 'hello world' ."),
        ("Which files mention ERROR in docs/?", "grep -rl ERROR docs"),
        ("Which .py files in src/app use requests?", "grep -l requests src/app/*.py"),
        ("Which file has the word foo in it?", "grep -rl --exclude-dir=.git foo ."),
    ],
)
def test_a_task_that_asks_which_file_holds_a_word_is_answered_by_a_search(
    task: str, command: str
) -> None:
    sought = sought_word(task)
    assert sought is not None and sought.command == command


@pytest.mark.parametrize(
    "task",
    [
        "Which file contains the most lines?",
        "Which file in the logs directory is the largest?",
        "How many lines of app.log contain ERROR?",
        "Which user has the id 1003?",
        "Which file has the most words?",
        "What does this repository do?",
    ],
)
def test_a_task_that_asks_for_something_else_seeks_no_word(task: str) -> None:
    assert sought_word(task) is None


def test_in_the_end_names_no_directory() -> None:
    sought = sought_word("Which file contains TODO in the end?")
    assert sought is not None and sought.directory == "."


def test_the_search_handed_over_finds_the_file_and_only_it(tmp_path: Path) -> None:
    """The command runs as handed over, in bash, on files like those of the task."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "plan.md").write_text("step 1\nTODO: book the room\n")
    (tmp_path / "notes" / "ideas.md").write_text("a bigger garden\n")
    (tmp_path / "fruit.txt").write_text("apple\nbanana\n")
    (tmp_path / "tools.txt").write_text("saw\n")
    for task, found in [
        ("Which file in the notes directory contains the word TODO?", "notes/plan.md\n"),
        ("Which of the .txt files here mentions the word banana?", "fruit.txt\n"),
    ]:
        sought = sought_word(task)
        assert sought is not None
        shell = subprocess.run(
            ["bash", "-c", sought.command], cwd=tmp_path, capture_output=True, text=True
        )
        assert shell.stdout == found


def test_a_search_that_ran_on_the_word_counts_whether_it_found_it_or_not() -> None:
    found = Result(command="grep -rl TODO notes", stdout="notes/plan.md\n", exit_code=0)
    none = Result(command="grep -l todo *.md", stdout="", exit_code=1)
    failed = Result(command="grep TODO notes", stderr="grep: notes: Is a directory\n", exit_code=2)
    listed = Result(command="ls -l notes", stdout="plan.md\n", exit_code=0)
    shown = Result(command="cat notes/plan.md", stdout="TODO: book\n", exit_code=0)
    assert search_for("TODO", [listed, found]) == found
    assert search_for("TODO", [none]) == none
    assert search_for("TODO", [failed, listed, shown]) is None
