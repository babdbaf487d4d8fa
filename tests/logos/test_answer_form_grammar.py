"""The grammars of the answer's forms on the real llama.cpp server: each parses, and a reply
under it has the form, where the same request without it does not."""

from __future__ import annotations

import pytest

from logos.models.llama_server import LocalModelServer
from logos.protocol.answer_form import AnswerForm
from logos.providers import Finish, Message, ModelRequest, OpenAIProvider, RetryPolicy, TextDelta

PROMPT = (
    "The command `wc -l notes.txt` printed `7 notes.txt`, and `ls` printed `notes.txt`. "
    "Explain at length how to count the lines of a file."
)
FORMS = [AnswerForm("number"), AnswerForm("name"), AnswerForm("bullets", 3)]


async def reply(server: LocalModelServer, grammar: str | None) -> tuple[str, str | None]:
    request = ModelRequest(
        system="Answer the user.",
        messages=[Message("user", PROMPT)],
        max_tokens=80,
        temperature=0.0,
        extra={"seed": 1, "top_k": 1, **({"grammar": grammar} if grammar else {})},
    )
    async with OpenAIProvider(
        model=server.model_name,
        base_url=server.openai_base_url,
        api_key=server.api_key,
        retry=RetryPolicy(max_attempts=1),
    ) as provider:
        events = [event async for event in provider.stream(request)]
    text = "".join(event.text for event in events if isinstance(event, TextDelta))
    return text, next((event.reason for event in events if isinstance(event, Finish)), None)


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
@pytest.mark.parametrize("form", FORMS, ids=[f"{f.kind} {f.count}" for f in FORMS])
async def test_a_reply_under_the_form_s_grammar_has_the_form(
    llama_server: LocalModelServer, form: AnswerForm
) -> None:
    free, _ = await reply(llama_server, None)
    assert not form.holds(free), f"the request no longer provokes prose: {free!r}"
    assert form.grammar is not None
    held, finish = await reply(llama_server, form.grammar)
    assert finish == "stop" and form.holds(held), (held, finish)
