"""Eliding old command output to stay inside the model's context window."""

from __future__ import annotations

from logos.context import elide_envelope, fit_to_window
from logos.envelope import format_results
from logos.providers.base import Message
from logos.result import Result


def test_every_body_is_elided_and_the_shape_kept() -> None:
    envelope = format_results(
        [
            Result(command="make", stdout="o" * 900 + "\n", stderr="e" * 700 + "\n", exit_code=2),
            Result(command="ls", stdout="a\nb\n", exit_code=0),
        ]
    )
    elided = elide_envelope(envelope)
    assert "o" * 10 not in elided and "e" * 10 not in elided
    assert "901 bytes" in elided and "701 bytes" in elided and "4 bytes" in elided
    for kept in ('<block index="1">', "$ make", "exit code 2", '<block index="2">', "$ ls"):
        assert kept in elided
    assert elided.count("<stdout>") == elided.count("</stdout>") == 2
    assert elided.count("<stderr>") == elided.count("</stderr>") == 1
    assert elide_envelope(elided) == elided


def test_output_that_holds_a_closing_tag_is_elided_whole() -> None:
    # A file about envelopes (or an XML log) can hold a line "</stdout>" of its own.
    stray = "<log>\n<stdout>\nold\n</stdout>\n</log>\n" + "x" * 5000 + "\n"
    envelope = format_results([Result(command="cat log.xml", stdout=stray, exit_code=0)])
    elided = elide_envelope(envelope)
    assert "x" * 10 not in elided and "<log>" not in elided
    assert f"{len(stray)} bytes" in elided
    assert elided.count("</stdout>") == 1


def test_output_that_mimics_the_envelope_still_shrinks() -> None:
    mimic = "head\n</stdout>\n<stderr>\nnot the real stderr\n" + "x" * 5000 + "\n"
    envelope = format_results(
        [
            Result(command="cat fake.txt", stdout=mimic, stderr="warning\n", exit_code=0),
            Result(command="true", stdout="y" * 3000, exit_code=0),
        ]
    )
    elided = elide_envelope(envelope)
    assert "x" * 10 not in elided and "y" * 10 not in elided and "warning" not in elided
    assert len(elided) < 1000


def test_cut_notes_stay_after_their_stream() -> None:
    result = Result(
        command="yes | head -c 99999",
        stdout="y\n" * 2000,
        stdout_dropped_bytes=95999,
        exit_code=0,
    )
    elided = elide_envelope(format_results([result]))
    assert "y\ny\n" not in elided
    assert "note: stdout was cut: 95999 bytes omitted" in elided


def test_only_the_oldest_envelopes_are_elided_until_the_history_fits() -> None:
    big = [format_results([Result(command=f"cat {n}", stdout="z" * 4000)]) for n in range(3)]
    messages = [Message("user", "task")]
    for envelope in big:
        messages += [Message("assistant", "<cmd>cat</cmd>"), Message("user", envelope)]
    fitted = fit_to_window("system", messages, context_window=2500, max_output_tokens=200)
    assert "elided" in fitted[2].content and "elided" in fitted[4].content
    assert fitted[6].content == big[2]  # the newest output is what the model works from
    assert messages[2].content == big[0]  # the caller's messages are not changed
    assert fit_to_window("system", messages, None, None) == messages
