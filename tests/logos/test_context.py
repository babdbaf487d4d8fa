"""Eliding old command output to stay inside the model's context window."""

from __future__ import annotations

from logos.agent.context import fit_to_window
from logos.agent.steps import StepMessage, steps_to_messages
from logos.protocol.envelope import format_results
from logos.providers.base import Message
from logos.result import Result


def test_only_the_oldest_envelopes_are_elided_until_the_history_fits() -> None:
    steps = []
    for n in range(3):
        results = (Result(command=f"cat {n}", stdout="z" * 4000),)
        steps += [
            StepMessage("assistant", "<cmd>cat</cmd>"),
            StepMessage("result", format_results(results), results=results),
        ]
    messages = [Message("user", "task"), *steps_to_messages(steps)]
    big = [message.content for message in messages[2::2]]
    fitted = fit_to_window("system", messages, context_window=2500, max_output_tokens=200)
    assert "elided" in fitted[2].content and "elided" in fitted[4].content
    assert fitted[6].content == big[2]  # the newest output is what the model works from
    assert messages[2].content == big[0]  # the caller's messages are not changed
    assert fit_to_window("system", messages, None, None) == messages


def test_messages_without_a_shorter_form_are_sent_as_they_are() -> None:
    messages = [Message("user", "z" * 40000), Message("assistant", "ok")]
    assert fit_to_window("system", messages, context_window=1000, max_output_tokens=None) == (
        messages
    )
