"""Where a first look finds a repository's facts when its README is not there."""

from __future__ import annotations

from logos.protocol.first_look import next_look, unlisted_directory, unread_look
from logos.result import Result

LISTING = Result(command="ls", stdout="package.json\nserver.js\nserver.test.js\n", exit_code=0)
NO_README = Result(
    command="head -n 40 README.md",
    stderr="head: cannot open 'README.md' for reading: No such file or directory\n",
    exit_code=1,
)


def test_a_missing_readme_leads_to_the_manifest_the_listing_shows() -> None:
    assert next_look([LISTING, NO_README]) == ("README.md", "package.json")


def test_once_read_or_with_nothing_missing_there_is_no_next_look() -> None:
    read = Result(command="cat package.json", stdout="{}", exit_code=0)
    assert next_look([LISTING, NO_README, read]) is None
    assert next_look([LISTING]) is None


def test_a_readme_comes_before_a_manifest_and_a_long_listing_counts() -> None:
    long_listing = Result(
        command="ls -la",
        stdout="-rw-r--r-- 1 u u 120 Mar 1 Makefile\n-rw-r--r-- 1 u u 300 Mar 1 README.md\n",
        exit_code=0,
    )
    no_manifest = Result(
        command="head -n 40 pyproject.toml",
        stderr="head: cannot open 'pyproject.toml' for reading: No such file or directory\n",
        exit_code=1,
    )
    assert next_look([long_listing, no_manifest]) == ("pyproject.toml", "README.md")


def test_only_a_listing_shows_a_file() -> None:
    mention = Result(command="head -n 40 notes.md", stdout="edit package.json first\n", exit_code=0)
    assert unread_look([mention, NO_README]) is None


def test_a_file_the_task_names_comes_first_and_one_it_asks_to_write_is_not_read() -> None:
    """The default model, asked for the first line of readme.txt, looked in README.md."""
    task = "What is the first line of readme.txt?"
    assert next_look([NO_README], task) == ("README.md", "readme.txt")
    to_write = "Count the lines of notes.txt and write that number to count.txt."
    missing = Result(
        command="head -n 40 notes.md",
        stderr="head: cannot open 'notes.md' for reading: No such file or directory\n",
        exit_code=1,
    )
    assert next_look([missing], to_write) == ("notes.md", "notes.txt")
    read = Result(command="wc -l notes.txt", stdout="17 notes.txt\n", exit_code=0)
    assert next_look([missing, read], to_write) is None


def test_the_latest_miss_is_the_one_answered() -> None:
    """Handed `head -n 40 readme.txt` after missing README.md, the default model ran
    `head -n 40 README.txt`: that miss is answered with the file the task names."""
    task = "What is the first line of readme.txt?"
    upper = Result(
        command="head -n 40 README.txt",
        stderr="head: cannot open 'README.txt' for reading: No such file or directory\n",
        exit_code=1,
    )
    assert next_look([NO_README, upper], task) == ("README.txt", "readme.txt")


def test_with_nothing_to_read_instead_a_directory_the_task_names_is_listed() -> None:
    """Asked for the extension of the only file in the inbox directory, the default model
    looked for a README, twice, and answered ".md"."""
    task = "What is the file extension of the only file in the inbox directory?"
    listing = Result(command="ls", stdout="inbox\n", exit_code=0)
    assert next_look([listing, NO_README], task) is None
    assert unlisted_directory([listing, NO_README], task) == ("README.md", "inbox")
    looked = Result(command="ls -l inbox", stdout="invoice.pdf\n", exit_code=0)
    assert unlisted_directory([listing, NO_README, looked], task) is None
    assert unlisted_directory([listing], task) is None  # no look missed
    assert (
        unlisted_directory([Result(command="ls", stdout="notes\n", exit_code=0), NO_README], task)
        is None
    )
