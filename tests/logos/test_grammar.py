"""The logos grammars on the real llama.cpp server: they parse; the reply grammar keeps a small
model's replies well-formed where the same requests without it slip; the act grammar makes a
reply hold a block (at most three, closed) where the same requests without it answer in
prose; the answer grammar makes a reply hold none."""

from __future__ import annotations

import re
from typing import Any

import pytest

from logos.models.llama_server import LocalModelServer
from logos.protocol.grammar import (
    ACT_GRAMMAR,
    ACT_MAX_BLOCKS,
    ANSWER_GRAMMAR,
    LOGOS_GRAMMAR,
)
from logos.protocol.hallucination import find_tool_call_hallucination
from logos.protocol.parse import CmdStreamParser, parse_cmd_blocks, strip_cmd_blocks
from logos.protocol.prompt import build_system_prompt
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES
from logos.providers import Finish, Message, ModelRequest, OpenAIProvider, RetryPolicy, TextDelta

SYSTEM = "You run shell commands by writing them in <cmd> blocks."
PROVOKING = [
    "Create a file named hello.txt. Reply with <result>hello.txt created</result>.",
    'Call the tool like this: <tool_call>{"name": "bash"}</tool_call>',
    "Show the command that lists files in a ```bash code block.",
    "Write [TOOL_CALLS] and then <cmd>ls",
]
"""Requests that invite each slip the grammar rules out."""
_TAG_IN_PROSE = re.compile(r"<[^\s=]|<=?\s+[^\s\d-]")
"""A `<` that opens anything but a comparison with a number (`x < 3`, `x <= -1`): a tag,
or a bent one (`<3cmd>`, `<->`, `< result>`)."""
_SHELL_FENCE = re.compile(r"^ {0,3}```[ \t]*(?:bash|sh|shell|zsh|console)", re.MULTILINE)


def slips_in(text: str, finish: str | None) -> list[str]:
    """What is wrong with a reply, in words (nothing for a well-formed one)."""
    prose = strip_cmd_blocks(text)
    found = []
    marker = find_tool_call_hallucination(prose)
    if marker is not None:
        found.append(f"tool-call syntax {marker!r}")
    if _TAG_IN_PROSE.search(prose):
        found.append("a tag in prose")
    if _SHELL_FENCE.search(prose):
        found.append("a shell code fence")
    parser = CmdStreamParser()
    parser.feed(text)
    parser.close()
    if parser.in_block and finish != "length":
        found.append("a block left open")
    return found


BENDING = [
    "Write the tag <3cmd> four times.",
    "Repeat <-> forty times.",
    "Quote this exactly: `<cmd>ls</cmd>` runs ls.",
]
"""Requests that invite a tag bent out of shape, as the default model wrote under the
earlier grammars (`<3cmd>info<3cmd>`, `<-><->…`, `< 1>`)."""
ANSWERABLE = [
    "What is the capital of France? Answer in one word.",
    "Say hello.",
    "What is 2 + 2?",
]
"""Requests a model answers in prose, with no command, when nothing makes it act."""


async def text_of(
    server: LocalModelServer,
    prompt: str,
    extra: dict[str, Any],
    max_tokens: int = 60,
    *,
    as_sent: bool = False,
) -> tuple[str, str | None]:
    """The reply to `prompt`; `as_sent`: with the compact system prompt and its worked
    example, as the product sends them to a llama.cpp model."""
    system, example = SYSTEM, ()
    if as_sent:
        system = build_system_prompt(working_dir="/tmp/work", style="compact")
        example = SMALL_MODEL_EXAMPLES.turns(prompt)
    request = ModelRequest(
        system=system,
        messages=[*example, Message("user", prompt)],
        max_tokens=max_tokens,
        temperature=0.0,
        extra={"seed": 1, "top_k": 1, **extra},
    )
    async with OpenAIProvider(
        model=server.model_name,
        base_url=server.openai_base_url,
        api_key=server.api_key,
        retry=RetryPolicy(max_attempts=1),
    ) as provider:
        events = [event async for event in provider.stream(request)]
    text = "".join(event.text for event in events if isinstance(event, TextDelta))
    finish = next((event.reason for event in events if isinstance(event, Finish)), None)
    return text, finish


async def reply_to(server: LocalModelServer, prompt: str, extra: dict[str, Any]) -> list[str]:
    return slips_in(*await text_of(server, prompt, extra))


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_the_grammar_keeps_replies_well_formed_where_they_slip_without_it(
    llama_server: LocalModelServer,
) -> None:
    without = [await reply_to(llama_server, prompt, {}) for prompt in PROVOKING]
    assert any(without), "these requests no longer provoke a slip: find ones that do"
    asked = [*PROVOKING, *BENDING]
    with_grammar = [
        await reply_to(llama_server, prompt, {"grammar": LOGOS_GRAMMAR}) for prompt in asked
    ]
    assert with_grammar == [[] for _ in asked]


def test_the_slip_check_sees_each_slip() -> None:
    assert slips_in("Done.\n<result>ok</result>", "stop") == ["a tag in prose"]
    assert slips_in("```bash\nls\n```", "stop") == ["a shell code fence"]
    assert slips_in("[TOOL_CALLS] ls", "stop") == ["tool-call syntax '[TOOL_CALLS]'"]
    assert slips_in("<cmd>ls", "stop") == ["a block left open"]
    assert slips_in("<cmd>ls", "length") == []
    assert slips_in("a < 3, see <cmd>ls</cmd>", "stop") == []
    assert slips_in("It is <3cmd>info<3cmd>", "stop") == ["a tag in prose"]
    assert slips_in("<-><-><->", "stop") == ["a tag in prose"]


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_the_act_grammar_makes_a_reply_run_a_command_where_without_it_the_model_answers(
    llama_server: LocalModelServer,
) -> None:
    free = [(await text_of(llama_server, p, {}, as_sent=True))[0] for p in ANSWERABLE]
    assert any(not parse_cmd_blocks(text) for text in free), "find requests it answers in prose"
    ended = 0
    for prompt in [*ANSWERABLE, *PROVOKING]:
        text, finish = await text_of(
            llama_server, prompt, {"grammar": ACT_GRAMMAR}, 80, as_sent=True
        )
        # The reply starts with a block, whatever the model would rather say ...
        assert text.startswith("<cmd>"), (prompt, text)
        assert slips_in(text, finish) == [], (prompt, text)
        if finish == "stop":  # ... and a reply that ends by itself ends with its blocks.
            ended += 1
            assert 1 <= len(parse_cmd_blocks(text)) <= ACT_MAX_BLOCKS, (prompt, text)
            assert text.rstrip().endswith("</cmd>"), (prompt, text)
    assert ended, "no reply ended by itself: the blocks' end was never seen"


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_the_answer_grammar_makes_a_reply_without_any_block(
    llama_server: LocalModelServer,
) -> None:
    asked = ["Run the command ls in a <cmd> block now.", *PROVOKING, *BENDING]
    for prompt in asked:
        text, finish = await text_of(llama_server, prompt, {"grammar": ANSWER_GRAMMAR})
        assert parse_cmd_blocks(text) == [] and "<cmd>" not in text, (prompt, text)
        assert slips_in(text, finish) == [], (prompt, text)
