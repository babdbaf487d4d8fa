"""AnthropicProvider against a real local HTTP server speaking the Messages SSE format."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from logos.errors import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    NotFoundError,
    ProviderError,
    RetriesExhaustedError,
    ServerError,
    StreamInterruptedError,
)
from logos.providers import (
    AnthropicProvider,
    Finish,
    Message,
    ModelRequest,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.providers.anthropic import DEFAULT_MODEL
from tests.support.sse_server import (
    Reply,
    ScriptedServer,
    anthropic_error,
    anthropic_stream,
    sse_event,
)

pytestmark = pytest.mark.anyio

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.0)
REQUEST = ModelRequest(system="Be terse.", messages=[Message("user", "hi")])


@pytest.fixture
async def provider(sse_server: ScriptedServer) -> AsyncIterator[AnthropicProvider]:
    async with AnthropicProvider(
        model="claude-test", api_key="sk-ant-test", base_url=sse_server.base_url, retry=FAST_RETRY
    ) as p:
        yield p


async def collect(
    provider: AnthropicProvider, request: ModelRequest = REQUEST
) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("wire_chunk_size", [1, 4, 13, None])
async def test_text_streams_through_awkward_byte_boundaries(
    sse_server: ScriptedServer, provider: AnthropicProvider, wire_chunk_size: int | None
) -> None:
    text = "Ça marche — «ünïcödé» 🎉 <cmd>echo hi</cmd>"
    usage = {
        "input_tokens": 20,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
        "output_tokens": 9,
    }
    sse_server.enqueue(anthropic_stream(text, usage=usage, wire_chunk_size=wire_chunk_size))
    events = await collect(provider)
    assert text_of(events) == text
    assert events[-2:] == [
        UsageReport(
            Usage(input_tokens=20, output_tokens=9, cache_read_tokens=100, cache_write_tokens=7)
        ),
        Finish("stop", "end_turn"),
    ]
    # Pings and block boundaries produce no events of their own.
    assert all(isinstance(e, TextDelta) for e in events[:-2])


async def test_request_body_and_headers(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    sse_server.enqueue(anthropic_stream("ok"))
    request = ModelRequest(
        system="sys",
        messages=[Message("user", "one")],
        temperature=0.5,
        stop=["</cmd>"],
        extra={"metadata": {"user_id": "u1"}},
    )
    await collect(provider, request)
    [sent] = sse_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json == {
        "model": "claude-test",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": "one"}],
        "stream": True,
        "system": "sys",
        "stop_sequences": ["</cmd>"],
        "temperature": 0.5,
        "metadata": {"user_id": "u1"},
    }


async def test_thinking_and_signature_round_trip_into_the_next_request(
    sse_server: ScriptedServer,
) -> None:
    sse_server.enqueue(
        anthropic_stream("The answer.", thinking="Let me think… ok.", signature="c2lnbmF0dXJl"),
        anthropic_stream("Second answer."),
    )
    async with AnthropicProvider(
        model="claude-test", base_url=sse_server.base_url, max_tokens=4096, thinking_budget=2048
    ) as provider:
        events = await collect(provider)
        reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        signature = "".join(e.signature for e in events if isinstance(e, ReasoningSignature))
        assert (reasoning, signature, text_of(events)) == (
            "Let me think… ok.",
            "c2lnbmF0dXJl",
            "The answer.",
        )
        # Thinking streams before the text, as the API sends it.
        first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
        assert any(isinstance(e, ReasoningSignature) for e in events[:first_text])

        follow_up = ModelRequest(
            system="",
            messages=[
                Message("user", "q1"),
                Message("assistant", text_of(events), reasoning, signature),
                Message("user", "q2"),
            ],
        )
        await collect(provider, follow_up)
    first, second = (request.json for request in sse_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 4096
    assert "temperature" not in first
    assert second["messages"] == [
        {"role": "user", "content": "q1"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Let me think… ok.",
                    "signature": "c2lnbmF0dXJl",
                },
                {"type": "text", "text": "The answer."},
            ],
        },
        {"role": "user", "content": "q2"},
    ]


async def test_redacted_thinking_is_kept_and_sent_back(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    sse_server.enqueue(
        anthropic_stream("Done.", thinking="visible", signature="sig", redacted=["EncA", "EncB"]),
        anthropic_stream("Next."),
    )
    events = await collect(provider)
    redacted = tuple(e.data for e in events if isinstance(e, RedactedReasoning))
    assert redacted == ("EncA", "EncB")
    history = [
        Message("user", "q"),
        Message("assistant", "Done.", "visible", "sig", redacted_reasoning=redacted),
        Message("user", "again"),
    ]
    await collect(provider, ModelRequest(system="", messages=history))
    content = sse_server.requests[1].json["messages"][1]["content"]
    assert [block["type"] for block in content] == [
        "thinking",
        "redacted_thinking",
        "redacted_thinking",
        "text",
    ]
    assert [block.get("data") for block in content[1:3]] == ["EncA", "EncB"]


def test_messages_alternate_and_unsigned_reasoning_is_dropped() -> None:
    provider = AnthropicProvider(model="claude-test", api_key="", base_url="http://127.0.0.1:9")
    body = provider.request_body(
        ModelRequest(
            system="",
            messages=[
                Message("user", "a"),
                Message("user", "b"),
                Message("assistant", "c", reasoning="no signature"),
                Message("assistant", "", reasoning="r", reasoning_signature="s"),
                Message("user", "d"),
            ],
        )
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "c"},
                {"type": "thinking", "thinking": "r", "signature": "s"},
            ],
        },
        {"role": "user", "content": "d"},
    ]
    assert "system" not in body


async def test_temperature_with_thinking_is_refused_before_sending(
    sse_server: ScriptedServer,
) -> None:
    async with AnthropicProvider(
        model="claude-test", base_url=sse_server.base_url, thinking_budget=1024
    ) as provider:
        request = ModelRequest(system="", messages=[Message("user", "x")], temperature=0.2)
        with pytest.raises(BadRequestError, match=r"temperature 0\.2 cannot be used"):
            await collect(provider, request)
        small = ModelRequest(system="", messages=[Message("user", "x")], max_tokens=1000)
        with pytest.raises(BadRequestError, match="must be below max_tokens"):
            await collect(provider, small)
    assert sse_server.requests == []


@pytest.mark.parametrize(
    ("budget", "max_tokens", "words"),
    [(512, 8192, "at least 1024"), (8192, 8192, "below max_tokens")],
)
def test_thinking_budget_is_checked_at_construction(
    budget: int, max_tokens: int, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        AnthropicProvider(model="m", max_tokens=max_tokens, thinking_budget=budget)


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("tool_use", "other"),
        ("pause_turn", "other"),
    ],
)
async def test_stop_reasons(
    sse_server: ScriptedServer, provider: AnthropicProvider, stop_reason: str, reason: str
) -> None:
    sse_server.enqueue(anthropic_stream("x", stop_reason=stop_reason))
    events = await collect(provider)
    assert events[-1] == Finish(reason, stop_reason)  # type: ignore[arg-type]


async def test_missing_message_stop_after_stop_reason_is_complete(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    sse_server.enqueue(anthropic_stream("all here", message_stop=False))
    events = await collect(provider)
    assert (text_of(events), events[-1]) == ("all here", Finish("stop", "end_turn"))


def overloaded_event() -> bytes:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return sse_event(error, event="error")


async def test_overloaded_event_before_output_is_retried(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    start = anthropic_stream("", stop_reason=None, message_stop=False)
    sse_server.enqueue(Reply(body=[*start.body, overloaded_event()]), anthropic_stream("ok"))
    assert text_of(await collect(provider)) == "ok"
    assert len(sse_server.requests) == 2


async def test_overloaded_event_after_output_interrupts(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    partial = anthropic_stream("partial", stop_reason=None, message_stop=False)
    sse_server.enqueue(Reply(body=[*partial.body, overloaded_event()]))
    received: list[StreamEvent] = []
    with pytest.raises(StreamInterruptedError, match="overloaded") as caught:
        async for event in provider.stream(REQUEST):
            received.append(event)
    assert text_of(received) == "partial"
    assert caught.value.retryable
    assert caught.value.status == 529
    assert len(sse_server.requests) == 1


async def test_invalid_request_event_is_not_retried(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    sse_server.enqueue(Reply(body=[sse_event(error, event="error")]))
    with pytest.raises(BadRequestError, match="no"):
        await collect(provider)


async def test_529_status_is_retried(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    sse_server.enqueue(
        anthropic_error(529, "Overloaded", type="overloaded_error"), anthropic_stream("ok")
    )
    assert text_of(await collect(provider)) == "ok"


async def test_529_exhausted_names_overload(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(*[anthropic_error(529, "Overloaded", type="overloaded_error")] * 2)
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.0)
    async with AnthropicProvider(model="m", base_url=sse_server.base_url, retry=policy) as provider:
        with pytest.raises(
            RetriesExhaustedError, match=r"gave up after 2 attempts.*overloaded"
        ) as caught:
            await collect(provider)
    assert isinstance(caught.value.last_error, ServerError)


@pytest.mark.parametrize(
    ("status", "said", "error_type", "expected", "words"),
    [
        pytest.param(
            401,
            "invalid x-api-key",
            "authentication_error",
            AuthenticationError,
            ["ANTHROPIC_API_KEY", "invalid x-api-key", "req_test"],
            id="401 names the key",
        ),
        pytest.param(
            404,
            "model: claude-test",
            "not_found_error",
            NotFoundError,
            ["POST {base_url}/v1/messages", "unknown model 'claude-test'"],
            id="404 names the messages URL",
        ),
        pytest.param(
            400,
            "messages: roles must alternate",
            "invalid_request_error",
            BadRequestError,
            ["roles must alternate"],
            id="400 quotes the server",
        ),
        pytest.param(
            400,
            "prompt is too long: 201234 tokens > 200000 maximum",
            "invalid_request_error",
            ContextWindowExceededError,
            ["does not fit the model's context"],
            id="a prompt too long is a context window error",
        ),
    ],
)
async def test_error_answers_say_what_went_wrong(
    sse_server: ScriptedServer,
    provider: AnthropicProvider,
    status: int,
    said: str,
    error_type: str,
    expected: type[ProviderError],
    words: list[str],
) -> None:
    sse_server.enqueue(anthropic_error(status, said, type=error_type))
    with pytest.raises(expected) as caught:
        await collect(provider)
    for word in words:
        assert word.format(base_url=sse_server.base_url) in str(caught.value)


async def test_drop_mid_stream_interrupts(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    sse_server.enqueue(anthropic_stream("abcdefgh", chunk_size=2, drop_after=5))
    received: list[StreamEvent] = []
    with pytest.raises(StreamInterruptedError):
        async for event in provider.stream(REQUEST):
            received.append(event)
    # message_start, ping, content_block_start, then two deltas: "ab" and "cd".
    assert text_of(received) == "abcd"


async def test_drop_before_any_content_is_retried(
    sse_server: ScriptedServer, provider: AnthropicProvider
) -> None:
    # message_start and ping delivered nothing to the caller yet.
    sse_server.enqueue(anthropic_stream("lost", drop_after=2), anthropic_stream("kept"))
    assert text_of(await collect(provider)) == "kept"


def test_defaults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider(model="claude-sonnet-4-5-20250929")
    assert provider.base_url == "http://127.0.0.1:9"
    assert provider.context_window == 200_000


async def test_options_are_given_by_keyword(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(anthropic_stream("hi"))
    async with AnthropicProvider(api_key="sk-ant-kw", base_url=sse_server.base_url) as provider:
        assert provider.model == DEFAULT_MODEL
        assert text_of(await collect(provider)) == "hi"
    assert sse_server.requests[0].headers["x-api-key"] == "sk-ant-kw"
    with pytest.raises(TypeError):
        AnthropicProvider("sk-ant-positional", sse_server.base_url)
