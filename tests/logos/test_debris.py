"""Protocol debris in a small model's answer: what the issue's runs printed is found and
cleared, and ordinary prose (comparisons, links, lists) is left as written."""

from __future__ import annotations

import pytest

from logos.protocol.debris import clean_answer, find_debris

SEEN = [
    (
        "- It is a repository for storing files.<3cmd>info<3cmd>command<3cmd>not found<3cmd>",
        "- It is a repository for storing files. info command not found",
    ),
    ("The repository holds a loop." + "<->" * 300, "The repository holds a loop."),
    ("- runs shell commands in `cmd>…< 2>` blocks.", "- runs shell commands in ` … ` blocks."),
    ("<think>the README says</think>It runs commands.", "It runs commands."),
    (
        "- It stores files.\n- It is used to manage files.\n- It is used to manage files.\n"
        "- It is used to manage files.",
        "- It stores files.\n- It is used to manage files.",
    ),
    ("Done.</cmd>", "Done."),
    ("It has < result>3 files</result>.", "It has 3 files ."),
]
"""What the default model printed (the issue's runs and this branch's probes) and what is
left of it."""

CLEAN = [
    "x < 3 and y <= -4, so the loop ends.",
    "See <https://example.org/docs> for more.",
    "- logos: the agent loop\n- sandboxd: the daemon\n- tests: pytest",
    "It counted 1,000,000 rows in 12.5 s.",
    "Run `pytest -q` in the repository root.",
    "  indented code\n    more",
]


@pytest.mark.parametrize(("seen", "left"), SEEN)
def test_the_debris_small_models_print_is_found_and_cleared(seen: str, left: str) -> None:
    assert find_debris(seen), seen
    assert clean_answer(seen) == left
    assert find_debris(clean_answer(seen)) == []


@pytest.mark.parametrize("text", CLEAN)
def test_ordinary_prose_is_no_debris_and_stays_as_written(text: str) -> None:
    assert find_debris(text) == []
    assert clean_answer(text) == text.strip()


def test_each_kind_of_debris_is_named() -> None:
    kinds = {d.kind for d in find_debris("<think>a</think>b<3cmd>" + "ab" * 10)}
    assert kinds == {"thinking tag", "bent tag", "runaway repetition"}
    assert [d.kind for d in find_debris("- the same line here\n- the same line here")] == [
        "repeated line"
    ]
