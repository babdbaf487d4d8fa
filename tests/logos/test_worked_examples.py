"""Which worked examples a small model sees before its task, and what each example shows."""

from __future__ import annotations

import pytest

from bench.repo_questions import QUESTIONS, Question
from bench.small_tasks import TASKS
from logos.protocol.envelope import format_results
from logos.protocol.parse import parse_cmd_blocks
from logos.protocol.worked_examples import (
    DEFINITION,
    EXAMPLE_DIR,
    HOW_TO,
    LANGUAGE,
    LAST_CHANGE,
    SMALL_MODEL_EXAMPLES,
    WHAT_IT_IS,
    WorkedExample,
)

GENERAL = (LANGUAGE, WHAT_IT_IS)
BY_KIND = {"where": DEFINITION, "changed": LAST_CHANGE, "tests": HOW_TO}
"""The first-question suite's kinds with an example of their own."""


def kind_of(task: str) -> WorkedExample | None:
    """The example of a kind sent after the general ones, if any."""
    examples = SMALL_MODEL_EXAMPLES.for_task(task)
    assert examples[: len(GENERAL)] == GENERAL
    (kind,) = examples[len(GENERAL) :] or (None,)
    return kind


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_each_first_question_gets_the_examples_of_its_kind(question: Question) -> None:
    assert SMALL_MODEL_EXAMPLES.for_task(question.prompt) == (
        (*GENERAL, BY_KIND[question.kind]) if question.kind in BY_KIND else GENERAL
    )


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("Where are the database models declared?", DEFINITION),
        ("Where is parse_config implemented?", DEFINITION),
        ("Which module implements the retry policy?", None),
        ("Show me the commit history of src/app.py", LAST_CHANGE),
        ("What did the latest commit do?", LAST_CHANGE),
        ("how can I build it?", HOW_TO),
        ("How to install this package?", HOW_TO),
        ("Run the unit tests and tell me which fail", HOW_TO),
        ("In settings.ini, change debug = false to debug = true.", None),
        ("Change guests.txt so that every name in it is in upper case.", None),
        ("What is the last line of notes.txt?", None),
        ("How many lines does notes.txt have?", None),
    ],
)
def test_cues_pick_the_kind_by_what_the_task_asks(task: str, kind: WorkedExample | None) -> None:
    assert kind_of(task) is kind


def test_in_the_small_task_suite_only_the_tasks_that_seek_a_definition_get_a_kind() -> None:
    """The small-task suite's other tasks act on files: they keep the general examples."""
    kinds = {task.id: kind_of(task.prompt) for task in TASKS}
    assert {tid: kind for tid, kind in kinds.items() if kind is not None} == {
        "find-function": DEFINITION,
        "two-find-and-copy": DEFINITION,
    }


@pytest.mark.parametrize("example", [*GENERAL, *BY_KIND.values()], ids=lambda example: example.task)
def test_an_example_is_a_task_one_acting_reply_its_envelope_and_an_answer(
    example: WorkedExample,
) -> None:
    task, acting, results, answer = example.turns()
    assert [m.role for m in (task, acting, results, answer)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert task.content == example.task
    assert parse_cmd_blocks(acting.content) == [look.command for look in example.looks]
    assert results.content == format_results(list(example.looks))
    assert all(look.ok and look.stdout for look in example.looks)
    assert not parse_cmd_blocks(answer.content) and answer.content == example.answer


def test_the_turns_sent_are_the_examples_in_order() -> None:
    task = "what changed recently?"
    assert SMALL_MODEL_EXAMPLES.turns(task) == (
        *LANGUAGE.turns(),
        *WHAT_IT_IS.turns(),
        *LAST_CHANGE.turns(),
    )


def test_only_the_last_commit_example_is_shown_when_answering() -> None:
    view, answer = LAST_CHANGE.answering_turns()
    assert view.content.startswith(f"Commands ran in {EXAMPLE_DIR}:")
    assert "$ git log -1 --stat --format=%s\nAdd neap tides to the table\n" in view.content
    assert view.content.endswith(f"Question: {LAST_CHANGE.task}")
    assert answer.content == LAST_CHANGE.answer
    assert SMALL_MODEL_EXAMPLES.answering_turns("what changed last?") == (view, answer)
    for task in ("what does this do?", "where is main defined?", "how do I run the tests?"):
        assert SMALL_MODEL_EXAMPLES.answering_turns(task) == ()


def test_the_example_with_no_readme_reads_the_manifest_and_is_shown_only_for_its_kind() -> None:
    """A how-to question sees a first look that reads the manifest a README-less listing
    shows; the general examples read the README, so that a task about a file (`wc -l
    notes.txt`) is not steered to read that file's head instead."""
    listing, manifest = HOW_TO.looks
    assert listing.command == "ls" and "README" not in listing.stdout
    assert manifest.command == "head -n 40 pyproject.toml" and "pyproject.toml" in listing.stdout
    assert "pyproject.toml" in HOW_TO.answer
    for example in GENERAL:
        assert [look.command for look in example.looks] == ["ls", "head -n 40 README.md"]
    assert HOW_TO not in SMALL_MODEL_EXAMPLES.for_task("How many lines are in notes.txt?")
