"""A question that asks for a number, the numbers outputs hold alone, and a listing counted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from logos.protocol.asked_number import asks_for_number, lone_numbers, offered
from logos.protocol.pitfalls import ADD_UP
from logos.result import Result


def ran(command: str, stdout: str, exit_code: int = 0, stderr: str = "") -> Result:
    return Result(command=command, stdout=stdout, stderr=stderr, exit_code=exit_code)


@pytest.mark.parametrize(
    ("task", "asks"),
    [
        ("How many lines of app.log contain ERROR?", True),
        ("how much disk does it use?", True),
        ("What is the total of the quantity column in stock.csv?", True),
        ("What is the largest number in numbers.txt?", True),
        ("Add up the numbers in prices.txt.", True),
        ("Which file is the largest? Reply with only the number.", True),
        ("What port number is set in server.ini?", False),
        ("Which file in the logs directory is the largest?", False),
        ("Count the lines of notes.txt and write that number to count.txt.", False),
        ("Add up the numbers in numbers.txt and write the total to total.txt.", False),
        ("How many words are in essay.txt? Save the count to count.txt.", False),
        ("what does this repository do?", False),
    ],
)
def test_a_question_asks_for_a_number_by_its_words(task: str, asks: bool) -> None:
    assert asks_for_number(task) is asks


def test_an_output_holds_a_number_alone_when_it_is_the_only_one_a_command_printed() -> None:
    results = [
        ran("wc -l notes.txt", "17 notes.txt\n"),
        ran("grep ERROR app.log", "2026-03-02 10:02:00 ERROR disk\n2026-03-04 10:04:00 ERROR\n"),
        ran("wc -l data/*.csv", " 2 data/apr.csv\n 2 data/feb.csv\n 4 total\n"),
        ran("awk '{s += $1} END {print s}' n.txt", "total: 107\n"),
        ran("cat missing.txt", "", 1, "cat: missing.txt: No such file or directory\n"),
        ran("grep -c banana fruit.txt", "0\n", 1),
        ran("ls", "data_2026.csv\nv1.2-notes.md\n"),
    ]
    task = "How many lines of app.log contain ERROR?"
    assert lone_numbers(results, task) == ["17", "107", "0"]
    echoed = [ran("echo 14", "14\n"), ran("printf '%s\\n' 14", "14\n")]
    assert lone_numbers(echoed, task) == []
    assert lone_numbers([ran("echo $((14 + 23))", "37\n")], task) == ["37"]


def test_a_part_of_a_file_works_out_no_largest_sum_or_count_but_may_be_what_is_asked() -> None:
    """Asked for the largest number in a file, the default model ran `head -n 1` and answered
    the first; asked for the number on a file's first line, that is the answer."""
    first = [ran("head -n 1 scores.txt", "58\n")]
    assert lone_numbers(first, "What is the largest number in scores.txt?") == []
    assert lone_numbers(first, "What is the sum of scores.txt? Just the number.") == []
    assert lone_numbers(first, "What number is on line 1? Answer with just the number.") == ["58"]
    assert lone_numbers([ran("cat scores.txt", "58\n")], "What is the largest?") == ["58"]
    largest = "What is the largest number in scores.txt? Answer with just the number."
    assert offered(largest, first) == "sort -n scores.txt | tail -n 1"
    assert offered(largest, [ran("cat scores.txt", "58\n")]) is None


@pytest.mark.parametrize(
    ("command", "count"),
    [
        ("grep ERROR app.log", "grep ERROR app.log | wc -l"),
        ("grep -i 'error' app.log", "grep -i 'error' app.log | wc -l"),
        ("ls data/*.csv", "ls data/*.csv | wc -l"),
        ("ls -1 config", "ls -1 config | wc -l"),
        ("find src -name '*.py'", "find src -name '*.py' | wc -l"),
        # Shapes whose lines are not one per thing counted: no command handed over.
        ("grep -c ERROR app.log", None),
        ("grep -n ERROR app.log", None),
        ("ls -l data", None),
        ("find projects -type d", None),
        ("wc -l data/*.csv", None),
        ("cat app.log | grep ERROR", None),
        ("grep ERROR app.log > errors.txt", None),
    ],
)
def test_a_listing_of_one_line_per_thing_is_offered(command: str, count: str | None) -> None:
    listed = [ran(command, "first\nsecond\nthird\n")]
    assert offered("How many lines of app.log contain ERROR?", listed) == count


@pytest.mark.parametrize(
    ("command", "count"),
    [
        ("wc -l data/*.csv", "ls -d data/*.csv | wc -l"),
        ("ls -l data/*.csv", "ls -d data/*.csv | wc -l"),
        ("head -n 1 config/*.json", "ls -d config/*.json | wc -l"),
        ("wc -l data/*.csv data/*.tsv", None),
        ("grep -l x 'data/*.csv'", None),
    ],
)
def test_files_named_by_one_pattern_are_counted_by_the_names_it_matches(
    command: str, count: str | None
) -> None:
    listed = [ran(command, " 2 data/apr.csv\n 2 data/feb.csv\n 4 total\n")]
    assert offered("How many files of data are there?", listed) == count


@pytest.mark.parametrize(
    ("task", "count"),
    [
        ("How many .json files are in the config directory?", "ls -d config/*.json | wc -l"),
        ("How many .csv files are under data/2026?", "ls -d data/2026/*.csv | wc -l"),
        ("How many .py files are there? Reply with only the number.", "ls -d *.py | wc -l"),
    ],
)
def test_files_of_one_kind_are_counted_where_the_task_says_whatever_the_model_ran(
    task: str, count: str
) -> None:
    """Sent to a directory listed by size, the default model answered 1 for three."""
    by_size = ran(
        "ls -lS config", "total 16\n-rw-r--r-- 1 u u 16 notes.txt\n-rw-r--r-- 1 u u 3 a.json\n"
    )
    assert offered(task, [by_size]) == count


def test_only_a_count_of_things_from_the_last_command_that_worked_is_offered() -> None:
    listing = ran("grep ERROR app.log", "a\nb\n")
    assert offered("How many words are in poem.txt?", [listing]) is None
    assert offered("What is the sum of the numbers?", [listing]) is None
    assert offered("How many errors?", [ran("grep ERROR app.log", "one line\n")]) is None
    failed = ran("ls nowhere", "", 2, "ls: cannot access 'nowhere'\n")
    assert offered("How many errors?", [listing, failed]) == "grep ERROR app.log | wc -l"


@pytest.mark.parametrize(
    ("task", "command"),
    [
        ("What is the largest number in numbers.txt?", "sort -n numbers.txt | tail -n 1"),
        ("Which is the smallest value in numbers.txt?", "sort -n numbers.txt | head -n 1"),
        ("What is the sum of the numbers in numbers.txt?", f"{ADD_UP} numbers.txt"),
        ("What is the average of numbers.txt?", "awk '{s += $1} END {print s / NR}' numbers.txt"),
        ("How many numbers does numbers.txt hold?", "wc -l < numbers.txt"),
        ("Which number in numbers.txt is odd?", None),
    ],
)
def test_a_file_of_numbers_shown_is_worked_out_as_the_question_asks(
    task: str, command: str | None
) -> None:
    for shown in ("cat numbers.txt", "head -n 40 numbers.txt"):
        assert offered(task, [ran(shown, "12\n7\n31\n")]) == command
    words = ran("cat numbers.txt", "12 apples\n7 pears\n")
    assert offered("What is the largest number in numbers.txt?", [words]) is None


@pytest.mark.parametrize(
    ("task", "command"),
    [
        ("How many lines do a.txt and b.txt have together?", "cat a.txt b.txt | wc -l"),
        ("How many words are in a.txt and b.txt in all?", "cat a.txt b.txt | wc -w"),
        ("How many lines does each of a.txt and b.txt have?", None),
    ],
)
def test_counts_of_several_files_asked_together_are_counted_together(
    task: str, command: str | None
) -> None:
    """Asked how many lines two files have together, the default model read one file's count
    off `wc`'s three lines."""
    flag = "-w" if "words" in task else "-l"
    counts = [ran(f"wc {flag} a.txt b.txt", " 9 a.txt\n14 b.txt\n23 total\n")]
    assert offered(task, counts) == command
    if command is not None:  # the unit the task asks for, whatever the model counted
        other = [
            ran(f"wc {'-l' if flag == '-w' else '-w'} a.txt b.txt", "1 a.txt\n1 b.txt\n2 total\n")
        ]
        assert offered(task, other) == command


CSV = "item,quantity\napples,14\npears,23\n"


@pytest.mark.parametrize(
    ("task", "command"),
    [
        (
            "What is the total of the quantity column in stock.csv?",
            f"awk -F, 'NR > 1 {{print $2}}' stock.csv | {ADD_UP}",
        ),
        (
            "What is the largest value in the quantity column of stock.csv?",
            "awk -F, 'NR > 1 {print $2}' stock.csv | sort -n | tail -n 1",
        ),
        ("What is the total of the price column in stock.csv?", None),
        ("How many rows does the quantity column have?", None),
    ],
)
def test_a_column_a_csv_header_names_is_worked_out_from_that_column(
    task: str, command: str | None
) -> None:
    """The default model summed the fourth field of a file of two, then added by eye."""
    shown = [ran("cat stock.csv", CSV), ran("awk '{sum += $4}' stock.csv", "")]
    assert offered(task, shown) == command


def test_the_commands_handed_over_print_the_number_asked(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1\n2\n")
    (tmp_path / "b.txt").write_text("3\n")
    (tmp_path / "stock.csv").write_text(CSV)
    column = offered("What is the total of the quantity column?", [ran("cat stock.csv", CSV)])
    together = offered("How many lines together?", [ran("wc -l a.txt b.txt", "2\n1\n3 total\n")])
    for command, printed in [(column, "37\n"), (together, "3\n")]:
        assert command is not None
        shell = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True
        )
        assert shell.stdout.strip() == printed.strip()


def test_different_things_a_file_shows_one_per_line_are_counted_once_each() -> None:
    shown = [ran("head -n 40 colours.txt", "red\nblue\nred\n")]
    task = "How many different colours are listed in colours.txt?"
    assert offered(task, shown) == "sort -u colours.txt | wc -l"
    assert offered("How many colours are listed in colours.txt?", shown) is None


def test_the_line_a_word_is_on_is_the_number_a_command_that_numbers_lines_printed(
    tmp_path: Path,
) -> None:
    """The default model ran `grep refund ledger.txt`, saw `refund 25`, and answered line 25."""
    task = "On which line of ledger.txt does the word refund appear?"
    assert asks_for_number(task) and asks_for_number("What line number has 'rent'?")
    unnumbered = [ran("grep refund ledger.txt", "refund 25\n")]
    assert lone_numbers(unnumbered, task) == []
    assert offered(task, unnumbered) == "grep -n refund ledger.txt | cut -d: -f1"
    for command, printed in [
        ("grep -n refund ledger.txt", "3:refund 25\n"),
        ("grep -n refund ledger.txt | cut -d: -f1", "3\n"),
        ("nl ledger.txt | grep refund", "     3\trefund 25\n"),
    ]:
        assert lone_numbers([ran(command, printed)], task) == ["3"], command
    assert lone_numbers([ran("cat -n ledger.txt", "1 rent\n2 refund\n")], task) == []
    (tmp_path / "ledger.txt").write_text("rent 900\ngroceries 84\nrefund 25\n")
    handed = subprocess.run(
        ["bash", "-c", "grep -n refund ledger.txt | cut -d: -f1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert handed.stdout == "3\n"


def test_a_column_is_worked_out_only_by_a_command_that_splits_on_commas() -> None:
    """The model's `awk '{sum += $3} END {print sum / NR}' results.csv` printed 0, and it
    answered with a number of the file."""
    task = "What is the average of the score column in results.csv?"
    unsplit = ran("awk '{sum += $3} END {print sum / NR}' results.csv", "0\n")
    assert lone_numbers([unsplit], task) == []
    for command in (
        "awk -F, 'NR > 1 {s += $2} END {print s / (NR - 1)}' results.csv",
        "cut -d, -f2 results.csv | tail -n +2 | awk '{s += $1} END {print s / NR}'",
        "awk -F',' 'NR > 1 {s += $2} END {print s / 3}' results.csv",
    ):
        assert lone_numbers([ran(command, "80\n")], task) == ["80"], command
    assert offered(task, [ran("cat results.csv", "name,score\nann,80\n"), unsplit]) == (
        "awk -F, 'NR > 1 {print $2}' results.csv | awk '{s += $1} END {print s / NR}'"
    )
    line = "What line number is the word 'gamma' on in greek.txt?"
    assert offered(line, [ran("grep gamma greek.txt", "gamma 7\n")]) == (
        "grep -n gamma greek.txt | cut -d: -f1"
    )
