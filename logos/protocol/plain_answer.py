"""The view a small model answers from when the loop makes it answer: the task and what the
run's commands printed, plainly, and nothing else.

Measured with the default 0.5B model on "what does this repository do?": asked to answer at
the end of the whole conversation, it copies the worked example's made-up project into its
answer, writes the files of `ls` as bullets, or bends the `<cmd>` it read in a README into
`< 2>`; shown the same outputs as one plain message, it summarises them, as it does with a
README pasted into a chat. The worked example is for learning the protocol; an answer needs
none of it. The wording is measured too: "Commands that ran, and their output:" with a
system prompt asking to name files exactly made the model echo the question back as its
answer, three times of three.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from logos.providers.base import Message
from logos.result import Result

ANSWER_SYSTEM = (
    "You work in a Linux shell. Answer the user's question from the output of the commands "
    "that ran, and only from it. Answer briefly, in plain prose or bullet points."
)
MAX_OUTPUT_CHARS = 6000
"""Of each command's output: the start of a long file is what a first look reads."""
MAX_VIEW_CHARS = 16000
"""Of all outputs together: the latest ones are kept, within a small model's window."""


def plain_answer_view(
    task: str, results: Iterable[Result], working_dir: str, asks: Sequence[str] = ()
) -> list[Message]:
    """One user message: each distinct command's output (the same command with the same
    output once), the latest last, then the task and what else the answer is `asks`ed to
    be (the form the task asks for, `logos.protocol.answer_form`; what not to name)."""
    shown: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for result in results:
        key = (" ".join(result.command.split()), result.stdout, result.stderr)
        if key in seen:
            continue
        seen.add(key)
        shown.append(_shown(result))
    kept: list[str] = []
    total = 0
    for part in reversed(shown):
        total += len(part)
        if kept and total > MAX_VIEW_CHARS:
            break
        kept.insert(0, part)
    outputs = "\n".join(kept) if kept else "(no command printed anything)\n"
    question = "\n".join([task.strip(), *asks])
    content = f"Commands ran in {working_dir}:\n\n{outputs}\nQuestion: {question}"
    return [Message(role="user", content=content)]


def _shown(result: Result) -> str:
    output = result.stdout + result.stderr
    if len(output) > MAX_OUTPUT_CHARS:
        output = output[:MAX_OUTPUT_CHARS] + "\n[… the rest of the output is left out]\n"
    if output and not output.endswith("\n"):
        output += "\n"
    status = "" if result.ok else " (it failed)"
    return f"$ {result.command}{status}\n{output}"
