"""The directory a task's words name."""

from __future__ import annotations

import pytest

from logos.protocol.task_directory import named_directory


@pytest.mark.parametrize(
    ("text", "directory"),
    [
        ("Which file in the notes directory contains TODO?", "notes"),
        ("How many .md files does the docs directory hold?", "docs"),
        ("What is the smallest file in the data folder?", "data"),
        ("Look in the directory notes.", "notes"),
        ("Which file under src defines parse_date?", "src"),
        ("Which files mention ERROR in docs/?", "docs"),
        ("Which of the .txt files in this directory mentions banana?", "."),
        ("Which file contains TODO in the end?", "."),
        ("How many files are in the folder?", "."),
        ("Keep the file and/or its copy.", "."),
    ],
)
def test_a_directory_is_named_by_its_word_a_preposition_or_a_path(
    text: str, directory: str
) -> None:
    """ "the docs directory" with no "in" before it names one too: asked how many .md files
    the docs directory holds, the count was handed over for the working directory."""
    assert named_directory(text) == directory
