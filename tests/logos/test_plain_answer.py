"""The plain view a small model answers from: each distinct command with its output, once,
the latest kept when they are long, then the question; nothing of the conversation."""

from __future__ import annotations

from logos.protocol.plain_answer import MAX_OUTPUT_CHARS, MAX_VIEW_CHARS, plain_answer_view
from logos.result import Result


def test_the_view_shows_each_command_once_then_the_question() -> None:
    ls = Result(command="ls", stdout="README.md\napp.py\n", exit_code=0)
    missing = Result(command="cat NOTES", stderr="cat: NOTES: No such file\n", exit_code=1)
    (view,) = plain_answer_view("what is this?", [ls, missing, ls], "/work/app")
    assert view.role == "user"
    assert view.content == (
        "Commands ran in /work/app:\n\n"
        "$ ls\nREADME.md\napp.py\n\n"
        "$ cat NOTES (it failed)\ncat: NOTES: No such file\n\n"
        "Question: what is this?"
    )


def test_long_outputs_keep_their_start_and_the_latest_commands() -> None:
    big = Result(command="cat big.txt", stdout="x" * (MAX_OUTPUT_CHARS * 2), exit_code=0)
    (view,) = plain_answer_view("q", [big], "/w")
    assert "[… the rest of the output is left out]" in view.content
    many = [Result(command=f"cat f{n}", stdout="y" * 5000, exit_code=0) for n in range(10)]
    (view,) = plain_answer_view("q", many, "/w")
    assert "$ cat f9\n" in view.content and "$ cat f0\n" not in view.content
    assert len(view.content) < MAX_VIEW_CHARS + 6000


def test_nothing_printed_is_said() -> None:
    (view,) = plain_answer_view("q", [], "/w")
    assert "(no command printed anything)" in view.content
