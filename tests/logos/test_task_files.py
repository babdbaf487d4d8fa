"""The files a task asks to be written, and whether a command wrote them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from logos.protocol.pitfalls import ADD_UP
from logos.protocol.task_files import files_to_write, offered_write, unmade_edit, unwritten
from logos.result import Result


@pytest.mark.parametrize(
    ("task", "files"),
    [
        ("Create a file count.txt that contains the number of words in essay.txt.", ["count.txt"]),
        ("Create a file named hello.txt containing the text: hello world", ["hello.txt"]),
        ("Count the lines of notes.txt and write that number to count.txt.", ["count.txt"]),
        (
            "Write the number of lines in todo.txt to lines.txt, with nothing else in it.",
            ["lines.txt"],
        ),
        ("Sort names.txt and save them to out/sorted.txt.", ["out/sorted.txt"]),
        ("Rename draft.txt to final.txt.", ["final.txt"]),
        ("How many lines does notes.txt have?", []),
        ("Copy report.txt into the backup directory.", []),
        ("Add a line saying 'buy stamps' at the end of todo.txt.", []),
    ],
)
def test_the_files_to_write_are_read_from_the_task(task: str, files: list[str]) -> None:
    assert files_to_write(task) == files


def test_a_file_is_written_once_a_command_that_succeeded_names_it() -> None:
    task = "Create a file count.txt that contains the number of words in essay.txt."
    counted = Result(command="wc -w essay.txt", stdout="14 essay.txt\n", exit_code=0)
    assert unwritten(task, [counted]) == ["count.txt"]
    failed = Result(command="wc -w essay.txt > /ro/count.txt", exit_code=1)
    assert unwritten(task, [counted, failed]) == ["count.txt"]
    wrote = Result(command="wc -w < essay.txt > count.txt", exit_code=0)
    assert unwritten(task, [counted, wrote]) == []


def test_the_file_is_offered_written_from_the_last_command_that_worked_a_value_out() -> None:
    read = Result(command="cat essay.txt", stdout="the river was cold\n", exit_code=0)
    counted = Result(command="wc -w essay.txt", stdout="4 essay.txt\n", exit_code=0)
    listed = Result(command="ls", stdout="essay.txt\n", exit_code=0)
    # wc's own pitfall rewrites it to write the count alone.
    task = "Create a file count.txt that contains the number of words in essay.txt."
    assert offered_write("count.txt", task, [read, counted, listed]) == (
        "wc -w < essay.txt > count.txt"
    )
    sorted_ = Result(command="sort names.txt", stdout="ada\nbob\n", exit_code=0)
    sort = "Sort names.txt and save them to sorted.txt."
    assert offered_write("sorted.txt", sort, [sorted_]) == "sort names.txt > sorted.txt"


def test_nothing_is_offered_from_commands_that_only_show_or_already_write() -> None:
    shown = [
        Result(command="cat essay.txt", stdout="text\n", exit_code=0),
        Result(command="ls", stdout="essay.txt\n", exit_code=0),
        Result(command="wc -w essay.txt > other.txt", exit_code=0),
        Result(command="wc -w missing.txt", stderr="no such file\n", exit_code=1),
    ]
    assert offered_write("count.txt", "Write the word count to count.txt.", shown) is None
    found = Result(command="grep -rl format_price src", stdout="src/money.py\n", exit_code=0)
    copy = "Count the lines of src/money.py and copy src/money.py to price_backup.py."
    assert offered_write("price_backup.py", copy, [found]) is None  # no file asked to find


@pytest.mark.parametrize(
    ("task", "printed", "offered"),
    [
        (
            "Find the file under src that defines format_price and copy it to price_backup.py.",
            "src/money.py:1:def format_price(cents):\n",
            "cp src/money.py price_backup.py",
        ),
        (
            "Find the file under src that defines format_price and copy it to price_backup.py.",
            "src/money.py:1:def format_price(cents):\nsrc/app.py:2:print(format_price(3))\n",
            "cp src/money.py price_backup.py",
        ),
        (
            "Find the file in notes that mentions TODO and move it to todo.md.",
            "notes/plan.md\n",
            "mv notes/plan.md todo.md",
        ),
        (
            "Find the file in notes that mentions TODO and move it to todo.md.",
            "notes/plan.md\nnotes/ideas.md\n",
            None,
        ),
    ],
)
def test_a_copy_of_the_file_asked_for_is_offered_from_the_one_file_a_search_picked(
    task: str, printed: str, offered: str | None
) -> None:
    """Told only that price_backup.py was not written yet, the default model searched for
    the name price_backup.py, twice, then explained how one would copy the file."""
    name = "price_backup.py" if "price" in task else "todo.md"
    command = "grep -rn format_price src" if "price" in task else "grep -rl TODO notes"
    searched = [Result(command=command, stdout=printed, exit_code=0)]
    assert offered_write(name, task, searched) == offered


@pytest.mark.parametrize(
    ("name", "task", "offered"),
    [
        (
            "count.txt",
            "Count the lines of notes.txt and write that number to count.txt.",
            "wc -l < notes.txt > count.txt",
        ),
        (
            "words.txt",
            "Write the number of words in story.txt to words.txt.",
            "wc -w < story.txt > words.txt",
        ),
        (
            "total.txt",
            "Add up the numbers in numbers.txt and write the total to total.txt.",
            f"{ADD_UP} numbers.txt > total.txt",
        ),
        ("count.txt", "Write the word count to count.txt.", None),
        ("copy.txt", "Count the lines of notes.txt and copy notes.txt to copy.txt.", None),
    ],
)
def test_with_only_files_shown_the_file_is_offered_from_what_the_task_asks_of_a_file(
    name: str, task: str, offered: str | None
) -> None:
    """Asked to count the lines of notes.txt into count.txt, the default model showed the
    file with `head -n 40 notes.txt` and answered "10"."""
    shown = [Result(command="head -n 40 notes.txt", stdout="note 1\nnote 2\n", exit_code=0)]
    assert offered_write(name, task, shown) == offered


GREETING = "In greeting.txt, replace the word world with the word moon."


@pytest.mark.parametrize(
    ("task", "command", "offered"),
    [
        (
            GREETING,
            "sed 's/world/moon/g' greeting.txt",
            "sed 's/world/moon/g' greeting.txt > greeting.txt.new "
            "&& mv greeting.txt.new greeting.txt",
        ),
        (
            "Remove the line that says DELETE ME from list.txt, keeping the other lines.",
            "grep -v 'DELETE ME' list.txt",
            "grep -v 'DELETE ME' list.txt > list.txt.new && mv list.txt.new list.txt",
        ),
        (
            "Change guests.txt so that every name in it is in upper case.",
            "tr a-z A-Z < guests.txt",
            "tr a-z A-Z < guests.txt > guests.txt.new && mv guests.txt.new guests.txt",
        ),
        # What does not print the file changed, or a task that changes no file: nothing.
        ("Remove the line that says DELETE ME from list.txt.", "grep 'DELETE ME' list.txt", None),
        (GREETING, "cat greeting.txt", None),
        (GREETING, "sed 's/world/moon/g' greeting.txt | head -n 1", None),
        ("What does greeting.txt say?", "sed 's/world/moon/g' greeting.txt", None),
    ],
)
def test_a_change_only_printed_is_offered_made(
    task: str, command: str, offered: str | None
) -> None:
    printed = Result(command=command, stdout="hello moon\n", exit_code=0)
    edit = unmade_edit(task, [printed])
    assert (edit[1] if edit else None) == offered


def test_a_change_written_to_the_file_is_made() -> None:
    printed = Result(
        command="sed 's/world/moon/g' greeting.txt", stdout="hello moon\n", exit_code=0
    )
    moved = [printed, Result(command="mv g.new greeting.txt", exit_code=0)]
    assert unmade_edit(GREETING, moved) is None
    appended = Result(command="echo 'hello moon' > greeting.txt", exit_code=0)
    assert unmade_edit(GREETING, [printed, appended]) is None


@pytest.mark.parametrize(
    ("name", "task", "offered"),
    [
        (
            "config.json",
            'Create a file config.json that contains the JSON object {"debug": true}.',
            "echo '{\"debug\": true}' > config.json",
        ),
        (
            "list.json",
            "Create a file named list.json with the JSON array [1, 2, 3].",
            "echo '[1, 2, 3]' > list.json",
        ),
        ("a.txt", 'Create a file a.txt containing "hello there".', "echo 'hello there' > a.txt"),
        ("b.txt", "Create a file b.txt that holds 'it's here'.", None),
        ("c.txt", "Create a file c.txt containing the text: hello world", None),
    ],
)
def test_what_the_task_gives_word_for_word_is_offered_written(
    name: str, task: str, offered: str | None
) -> None:
    """Asked for config.json holding a JSON object, the default model ran `cat config.json`,
    three times, and explained how one would write the file."""
    missed = [Result(command=f"cat {name}", stderr="No such file or directory\n", exit_code=1)]
    assert offered_write(name, task, missed) == offered


def test_the_file_written_as_offered_holds_what_the_task_gave(tmp_path: Path) -> None:
    task = 'Create a file config.json that contains the JSON object {"debug": true}.'
    command = offered_write("config.json", task, [])
    assert command is not None
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
    assert json.loads((tmp_path / "config.json").read_text()) == {"debug": True}
