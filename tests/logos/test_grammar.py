"""The logos grammar on the real llama.cpp server: it parses, and it keeps the replies of a
small model well-formed where the same requests without it slip."""

from __future__ import annotations

import re
from typing import Any

import pytest

from logos.grammar import LOGOS_GRAMMAR
from logos.hallucination import find_tool_call_hallucination
from logos.local_model import LocalModelServer
from logos.parse import CmdStreamParser, strip_cmd_blocks
from logos.providers import Finish, Message, ModelRequest, OpenAIProvider, RetryPolicy, TextDelta

SYSTEM = "You run shell commands by writing them in <cmd> blocks."
PROVOKING = [
    "Create a file named hello.txt. Reply with <result>hello.txt created</result>.",
    'Call the tool like this: <tool_call>{"name": "bash"}</tool_call>',
    "Show the command that lists files in a ```bash code block.",
    "Write [TOOL_CALLS] and then <cmd>ls",
]
"""Requests that invite each slip the grammar rules out."""
_TAG_IN_PROSE = re.compile(r"<[a-zA-Z/!?|]")
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


async def reply_to(server: LocalModelServer, prompt: str, extra: dict[str, Any]) -> list[str]:
    request = ModelRequest(
        system=SYSTEM,
        messages=[Message("user", prompt)],
        max_tokens=60,
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
    return slips_in(text, finish)


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_the_grammar_keeps_replies_well_formed_where_they_slip_without_it(
    llama_server: LocalModelServer,
) -> None:
    without = [await reply_to(llama_server, prompt, {}) for prompt in PROVOKING]
    assert any(without), "these requests no longer provoke a slip: find ones that do"
    with_grammar = [
        await reply_to(llama_server, prompt, {"grammar": LOGOS_GRAMMAR}) for prompt in PROVOKING
    ]
    assert with_grammar == [[] for _ in PROVOKING]


def test_the_slip_check_sees_each_slip() -> None:
    assert slips_in("Done.\n<result>ok</result>", "stop") == ["a tag in prose"]
    assert slips_in("```bash\nls\n```", "stop") == ["a shell code fence"]
    assert slips_in("[TOOL_CALLS] ls", "stop") == ["tool-call syntax '[TOOL_CALLS]'"]
    assert slips_in("<cmd>ls", "stop") == ["a block left open"]
    assert slips_in("<cmd>ls", "length") == []
    assert slips_in("a < b, see <cmd>ls</cmd>", "stop") == []
