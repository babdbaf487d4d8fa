"""The first-question suite's own checks: every repository is built with its history, every
question's reference answer passes its check, and the answers a small model gave before
this suite existed (invented bullets, the worked example's project) do not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.repo_questions import EXAMPLE_FACTS, QUESTIONS, REPOSITORIES, Question, Repository
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES

KINDS = {"what", "stack", "tests", "where", "changed"}


def test_the_suite_covers_eight_kinds_of_repository_and_every_kind_of_question() -> None:
    assert len(REPOSITORIES) >= 8
    assert len({r.kind for r in REPOSITORIES}) == len(REPOSITORIES)
    assert {q.kind for q in QUESTIONS} == KINDS
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)


@pytest.mark.parametrize("repository", REPOSITORIES, ids=[r.name for r in REPOSITORIES])
def test_each_repository_is_built_with_its_history(repository: Repository, tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    repository.lay_out(workspace)
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    if repository.commits:
        assert log == [c.message for c in reversed(repository.commits)]
        assert (workspace / "README.md").is_file() == (not repository.kind.startswith("no README"))
    else:
        assert log  # this repository, cloned


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_the_reference_answer_passes_and_invented_ones_do_not(
    question: Question, tmp_path: Path
) -> None:
    assert question.check(tmp_path, question.reference), question.reference
    assert not question.check(tmp_path, "")
    for example in (*SMALL_MODEL_EXAMPLES.general, *SMALL_MODEL_EXAMPLES.kinds):
        assert not question.check(tmp_path, example.answer), example.answer
    for fact in EXAMPLE_FACTS:
        assert question.invented(f"{question.reference} Like {fact}.")


def test_the_issues_invented_bullets_fail_the_readme_question() -> None:
    (first,) = [q for q in QUESTIONS if q.id == "logos-what"]
    invented = (
        "- It is a repository for storing files.\n- It is used to store data.\n"
        "- It is used to store and manage files."
    )
    assert not first.check(Path("."), invented)
    assert first.invented(invented)


def test_an_answer_that_denies_the_fact_it_names_fails() -> None:
    """The default model's answer on a Rust crate that converts temperatures."""
    (question,) = [q for q in QUESTIONS if q.id == "tempconv-what"]
    assert not question.check(
        Path("."), "The project does not perform any conversion between Celsius and Fahrenheit."
    )
    assert question.check(
        Path("."), "It converts temperatures between Celsius and Fahrenheit. It has no tests."
    )
