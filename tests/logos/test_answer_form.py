"""The form a task asks its answer to take: read from the task's words, held or not by an
answer, and an answer reduced to a bare value when it states one the outputs show."""

from __future__ import annotations

import pytest

from logos.protocol.answer_form import AnswerForm, count_sentences, requested_form

NUMBER, NAME = AnswerForm("number"), AnswerForm("name")


@pytest.mark.parametrize(
    ("task", "form"),
    [
        ("How many lines are in notes.txt? Answer with just the number.", NUMBER),
        ("What is the sum of nums.txt? answer with just the number", NUMBER),
        ("How many .json files are there? Reply with only the number.", NUMBER),
        ("Give me the total only.", NUMBER),
        ("Which file mentions banana? Answer with just the file name.", NAME),
        ("Who is in room 214? Answer with just the name.", NAME),
        ("What is the first word? Answer with a single word.", NAME),
        ("what does this repository do? answer in three bullet points", AnswerForm("bullets", 3)),
        ("Describe this project in one sentence.", AnswerForm("sentences", 1)),
        ("Summarise the log in 2 sentences.", AnswerForm("sentences", 2)),
        ("How many lines does notes.txt have?", None),
        ("Count the words in story.txt and save that number in words.txt.", None),
        ("Which of the two sentences in a.txt is longer?", None),
        ("What does uname print? Answer with just the result.", None),
    ],
)
def test_the_form_is_read_from_the_task(task: str, form: AnswerForm | None) -> None:
    assert requested_form(task) == form


@pytest.mark.parametrize(
    ("form", "answer", "holds"),
    [
        (NUMBER, "7", True),
        (NUMBER, "**107**.", True),
        (NUMBER, "`-3.5`", True),
        (NUMBER, "7 lines", False),
        (NUMBER, "To count lines, run:\n```\n$ wc -l notes.txt\n```", False),
        (NAME, "buns.md", True),
        (NAME, "`recipes/buns.md`.", True),
        (NAME, "The file is buns.md", False),
        (AnswerForm("bullets", 3), "- a\n- b\n- c", True),
        (AnswerForm("bullets", 3), "* a\n\n* b\n1. c", True),
        (AnswerForm("bullets", 3), "Here:\n- a\n- b\n- c", False),
        (AnswerForm("bullets", 3), "- a\n- b", False),
        (AnswerForm("sentences", 1), "It prints tides (see setup.py), e.g. for a port.", True),
        (AnswerForm("sentences", 1), "It prints tides. It is small.", False),
    ],
)
def test_an_answer_holds_the_form_or_not(form: AnswerForm, answer: str, holds: bool) -> None:
    assert form.holds(answer) is holds


def test_a_bare_value_stated_once_and_shown_by_the_outputs_is_the_answer() -> None:
    assert NUMBER.reduced("There are 7 lines in notes.txt.", "how many?", "7 notes.txt\n") == "7"
    # Not shown by any output: the model's own sum, unconfirmed.
    assert NUMBER.reduced("The sum is 99.", "sum?", "15\n42\n") is None
    # Two candidates: which one is meant is not for logos to guess.
    assert NUMBER.reduced("4 of the 8 lines", "how many?", "4\n8\n") is None
    # Dates and names are not numbers.
    assert NUMBER.reduced("On 2026-03-02 there were 4 errors", "?", "4\n") == "4"
    task = "Which file mentions banana? Answer with just the file name."
    assert NAME.reduced("The file that mentions banana is fruit.txt.", task, "fruit.txt\n") == (
        "fruit.txt"
    )
    assert NAME.reduced("carol, or maybe dave", "Who has id 1003?", "carol:1003\ndave:1004") is None


def test_more_bullets_than_asked_keep_the_first_ones_and_fewer_are_not_reduced() -> None:
    three = AnswerForm("bullets", 3)
    assert three.reduced("Points:\n- a\n- b\n- c\n- d", "", "") == "- a\n- b\n- c"
    assert three.reduced("- a\n- b", "", "") is None
    assert AnswerForm("sentences", 1).reduced("One. Two.", "", "") is None


def test_bare_values_and_bullets_have_a_grammar_and_sentences_the_answer_grammar() -> None:
    assert NUMBER.grammar is not None and "[0-9]" in NUMBER.grammar
    assert NAME.grammar is not None
    bullets = AnswerForm("bullets", 3).grammar
    assert bullets is not None and "{2}" in bullets
    assert AnswerForm("sentences", 2).grammar is None


def test_sentences_are_counted_by_their_ends_and_by_lines() -> None:
    assert count_sentences("It reads setup.py and prints 3.5 m. Done!") == 2
    assert count_sentences("- one point\n- another point") == 2
    assert count_sentences("") == 0
