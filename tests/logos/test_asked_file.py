"""A task that asks which file (the one that holds a word, the largest, the newest): where to
look, the command that picks the file out, and whether a command of the run did."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from logos.protocol.asked_file import asked_file
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
        ("Which file in the logs directory is the largest?", "ls -S logs | head -n 1"),
        ("Which file under data is the smallest?", "ls -Sr data | head -n 1"),
        ("What is the newest file in the inbox folder?", "ls -t inbox | head -n 1"),
        ("Which .log file in logs/ is the oldest?", "ls -tr logs/*.log | head -n 1"),
        ("Which file here was most recently modified?", "ls -t . | head -n 1"),
    ],
)
def test_a_task_that_asks_which_file_is_answered_by_a_command_that_picks_it(
    task: str, command: str
) -> None:
    asked = asked_file(task)
    assert asked is not None and asked.command == command


@pytest.mark.parametrize(
    "task",
    [
        "Which file contains the most lines?",
        "How many lines of app.log contain ERROR?",
        "Which user has the id 1003?",
        "Which file has the most words?",
        "What is the largest number in scores.txt?",
        "What does this repository do?",
    ],
)
def test_a_task_that_asks_for_something_else_asks_for_no_file(task: str) -> None:
    assert asked_file(task) is None


def test_in_the_end_names_no_directory() -> None:
    asked = asked_file("Which file contains TODO in the end?")
    assert asked is not None and asked.directory == "."


def test_the_commands_handed_over_pick_the_file_and_only_it(tmp_path: Path) -> None:
    """Each command runs as handed over, in bash, on files like those of the tasks."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "plan.md").write_text("step 1\nTODO: book the room\n")
    (tmp_path / "notes" / "ideas.md").write_text("a bigger garden\n")
    (tmp_path / "fruit.txt").write_text("apple\nbanana\n")
    (tmp_path / "tools.txt").write_text("saw\n")
    (tmp_path / "logs").mkdir()
    for name, size in [("a.log", 121), ("b.log", 5001), ("c.log", 901)]:
        (tmp_path / "logs" / name).write_text("x" * size)
        os.utime(tmp_path / "logs" / name, (size, size))
    for task, picked in [
        ("Which file in the notes directory contains the word TODO?", "notes/plan.md"),
        ("Which of the .txt files here mentions the word banana?", "fruit.txt"),
        ("Which file in the logs directory is the largest?", "b.log"),
        ("Which file in the logs directory is the smallest?", "a.log"),
        ("Which file in the logs directory is the newest?", "b.log"),
        ("Which file in the logs directory is the oldest?", "a.log"),
    ]:
        asked = asked_file(task)
        assert asked is not None
        shell = subprocess.run(
            ["bash", "-c", asked.command], cwd=tmp_path, capture_output=True, text=True
        )
        assert shell.stdout == f"{picked}\n", task


def test_a_search_that_ran_on_the_word_picks_whether_it_found_it_or_not() -> None:
    asked = asked_file("Which file in the notes directory contains the word TODO?")
    assert asked is not None
    found = Result(command="grep -rl TODO notes", stdout="notes/plan.md\n", exit_code=0)
    none = Result(command="grep -l todo *.md", stdout="", exit_code=1)
    failed = Result(command="grep TODO notes", stderr="grep: notes: Is a directory\n", exit_code=2)
    listed = Result(command="ls -l notes", stdout="plan.md\n", exit_code=0)
    shown = Result(command="cat notes/plan.md", stdout="TODO: book\n", exit_code=0)
    assert asked.picked([listed, found]) == found
    assert asked.picked([none]) == none
    assert asked.picked([failed, listed, shown]) is None
    assert asked.printed_names(found) == ["notes/plan.md"]
    lines = Result(command="grep -rn TODO notes", stdout="notes/plan.md:2:TODO: book\n")
    assert asked.printed_names(lines) == []


def test_a_listing_sorted_and_cut_to_one_line_picks_the_file_a_listing_read_by_eye_does_not() -> (
    None
):
    """The default model read `ls -l logs` and named the smallest file as the largest."""
    asked = asked_file("Which file in the logs directory is the largest?")
    assert asked is not None
    by_eye = Result(command="ls -l logs", stdout="a.log\nb.log\nc.log\n", exit_code=0)
    sorted_whole = Result(command="ls -lS logs", stdout="b.log\nc.log\na.log\n", exit_code=0)
    assert asked.picked([by_eye, sorted_whole]) is None
    for command in ("ls -S logs | head -n 1", "ls -lS logs | head -1", "du -a logs | sort -n"):
        first = Result(command=command, stdout="b.log\n", exit_code=0)
        assert asked.picked([by_eye, first]) == first
