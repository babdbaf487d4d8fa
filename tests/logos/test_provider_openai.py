"""OpenAIProvider against a real local HTTP server speaking the chat-completions SSE format.

Retry behaviour shared by both providers is covered here once.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import aclosing

import anyio
import httpx
import pytest

from logos.errors import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    RetriesExhaustedError,
    ServerError,
    StreamInterruptedError,
)
from logos.providers import (
    Finish,
    Message,
    ModelRequest,
    OpenAIProvider,
    ReasoningDelta,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.providers.openai import DEFAULT_MODEL
from tests.support.parts import require
from tests.support.sse_server import (
    Drop,
    Pause,
    Reply,
    ScriptedServer,
    dropped_connection,
    json_error,
    openai_stream,
    sse_event,
)

pytestmark = pytest.mark.anyio

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.0, max_delay_s=5.0)
REQUEST = ModelRequest(system="Be terse.", messages=[Message("user", "hi")])


@pytest.fixture
async def provider(sse_server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    async with OpenAIProvider(
        model="test-model",
        base_url=f"{sse_server.base_url}/v1",
        api_key="sk-test",
        retry=FAST_RETRY,
    ) as p:
        yield p


async def collect(
    provider: OpenAIProvider, request: ModelRequest = REQUEST, **kwargs: object
) -> list[StreamEvent]:
    return [event async for event in provider.stream(request, **kwargs)]  # type: ignore[arg-type]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("wire_chunk_size", [1, 3, 5, 64, None])
async def test_text_streams_through_awkward_byte_boundaries(
    sse_server: ScriptedServer, provider: OpenAIProvider, wire_chunk_size: int | None
) -> None:
    text = "Grüße — ünïcödé 😀 and <cmd>ls</cmd>\nnext line"
    sse_server.enqueue(openai_stream(text, chunk_size=4, wire_chunk_size=wire_chunk_size))
    events = await collect(provider)
    assert text_of(events) == text
    assert events[-2:] == [
        UsageReport(Usage(input_tokens=11, output_tokens=12)),
        Finish("stop", "stop"),
    ]


async def test_request_body_and_headers(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(openai_stream("ok"))
    request = ModelRequest(
        system="sys",
        messages=[
            Message("user", "one"),
            Message("assistant", "two", reasoning="ignored", reasoning_signature="sig"),
            Message("user", "three"),
        ],
        max_tokens=50,
        temperature=0.2,
        stop=["</cmd>"],
        extra={"seed": 7, "temperature": 0.3},
    )
    await collect(provider, request)
    [sent] = sse_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 50,
        "temperature": 0.3,
        "stop": ["</cmd>"],
        "seed": 7,
    }


async def test_a_none_option_removes_a_field_logos_sends(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(openai_stream("ok"))
    request = ModelRequest(
        system="", messages=[Message("user", "hi")], extra={"stream_options": None}
    )
    await collect(provider, request)
    [sent] = sse_server.requests
    assert "stream_options" not in sent.json and sent.json["stream"] is True


async def test_no_key_means_no_authorization_header(
    sse_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{sse_server.base_url}/v1/")
    sse_server.enqueue(openai_stream("ok"))
    async with OpenAIProvider(model="local") as provider:
        assert text_of(await collect(provider)) == "ok"
    assert "authorization" not in sse_server.requests[0].headers
    assert sse_server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ("o3-mini", "max_completion_tokens"),
        ("gpt-5", "max_completion_tokens"),
        ("gpt-4o", "max_tokens"),
        ("openai/gpt-5", "max_tokens"),
        ("qwen3-8b", "max_tokens"),
    ],
)
def test_token_limit_field_follows_the_model(model: str, field: str) -> None:
    provider = OpenAIProvider(model=model, base_url="http://127.0.0.1:9/v1", api_key="")
    body = provider.request_body(ModelRequest(system="", messages=[], max_tokens=9))
    assert body[field] == 9
    other = ({"max_tokens", "max_completion_tokens"} - {field}).pop()
    assert other not in body


def test_token_limit_field_can_be_forced() -> None:
    provider = OpenAIProvider(
        model="o3", base_url="http://127.0.0.1:9/v1", token_limit_field="max_tokens"
    )
    assert provider.request_body(ModelRequest("", [], max_tokens=3))["max_tokens"] == 3


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_reasoning_deltas(
    sse_server: ScriptedServer, provider: OpenAIProvider, field: str
) -> None:
    sse_server.enqueue(openai_stream("answer", reasoning="step by step", reasoning_field=field))
    events = await collect(provider)
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "step by step"
    assert text_of(events) == "answer"
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[:first_text])


async def test_finish_length_and_detailed_usage(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 40},
        "completion_tokens_details": {"reasoning_tokens": 10},
        "cost": 0.0123,
    }
    sse_server.enqueue(openai_stream("truncat", finish="length", usage=usage))
    events = await collect(provider)
    assert events[-2:] == [
        UsageReport(
            Usage(
                input_tokens=60,
                output_tokens=30,
                cache_read_tokens=40,
                reasoning_tokens=10,
                cost_usd=0.0123,
            )
        ),
        Finish("length", "length"),
    ]


async def test_unknown_fields_and_llama_timings_are_ignored(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    chunk = {
        "choices": [{"index": 0, "delta": {"content": "x", "tool_calls": None}}],
        "timings": {"prompt_n": 3},
    }
    final = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3}, "timings": {"predicted_n": 1}}
    sse_server.enqueue(
        Reply(
            body=[
                b": comment\n\n",
                sse_event(chunk),
                sse_event(final),
                sse_event(usage),
                b"data: [DONE]\n\n",
            ]
        )
    )
    events = await collect(provider)
    assert events == [
        TextDelta("x"),
        UsageReport(Usage(input_tokens=3)),
        Finish("other", "tool_calls"),
    ]


@pytest.mark.timeout(60)
async def test_done_ends_the_turn_even_if_the_server_keeps_the_connection_open(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    reply = openai_stream("done")
    sse_server.enqueue(Reply(body=[*reply.body, Pause(120)]))
    with anyio.fail_after(30):
        events = await collect(provider)
    assert isinstance(events[-1], Finish)


@pytest.mark.parametrize(
    ("status", "error_type", "words"),
    [
        (401, AuthenticationError, ["API key was rejected", "OPENAI_API_KEY", "bad key"]),
        (403, PermissionDeniedError, ["permission denied", "test-model", "bad key"]),
        (400, BadRequestError, ["rejected the request", "bad key"]),
        (422, BadRequestError, ["rejected the request", "bad key"]),
        (413, BadRequestError, ["too large", "bad key"]),
    ],
)
async def test_client_errors_fail_at_once_with_the_server_message(
    sse_server: ScriptedServer,
    provider: OpenAIProvider,
    status: int,
    error_type: type[ProviderError],
    words: list[str],
) -> None:
    sse_server.enqueue(json_error(status, "bad key"), openai_stream("never"))
    with pytest.raises(error_type) as caught:
        await collect(provider)
    for word in words:
        assert word in str(caught.value)
    assert caught.value.status == status
    assert not caught.value.retryable
    assert len(sse_server.requests) == 1


async def test_404_names_the_model_the_base_url_and_the_request(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(json_error(404, "The model `test-model` does not exist"))
    with pytest.raises(NotFoundError) as caught:
        await collect(provider)
    base = f"{sse_server.base_url}/v1"
    message = str(caught.value)
    assert f"unknown model 'test-model' or wrong base URL '{base}'" in message
    assert f"POST {base}/chat/completions" in message
    assert "does not exist" in message


async def test_401_without_a_key_says_to_set_one(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(json_error(401, "missing key"))
    async with OpenAIProvider(model="m", base_url=sse_server.base_url, api_key="") as provider:
        with pytest.raises(AuthenticationError, match=r"none was sent.*set OPENAI_API_KEY"):
            await collect(provider)


async def test_error_body_that_is_not_json_is_quoted(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(
        Reply(status=400, headers={"content-type": "text/plain"}, body=[b"plain words"])
    )
    with pytest.raises(BadRequestError, match="plain words"):
        await collect(provider)


async def test_429_honours_retry_after_and_reports_the_retry(
    sse_server: ScriptedServer,
) -> None:
    sse_server.enqueue(
        json_error(429, "slow down", type="rate_limit_error", headers={"retry-after": "0.6"}),
        openai_stream("after wait"),
    )
    retries: list[tuple[str, int]] = []

    async def on_retry(reason: str, attempt: int) -> None:
        retries.append((reason, attempt))

    # A huge backoff proves the wait came from Retry-After, not from the policy.
    policy = RetryPolicy(max_attempts=3, base_delay_s=50.0, max_delay_s=50.0)
    async with OpenAIProvider(model="m", base_url=sse_server.base_url, retry=policy) as provider:
        with anyio.fail_after(30):
            events = await collect(provider, on_retry=on_retry)
    assert text_of(events) == "after wait"
    first, second = sse_server.requests
    assert 0.55 <= second.received_at - first.received_at < 20
    [(reason, attempt)] = retries
    assert attempt == 1
    assert "rate limited (HTTP 429: slow down)" in reason
    assert "retrying in 0.6 s" in reason


async def test_retry_after_ms_and_sync_callbacks(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        json_error(503, "busy", type="server_error", headers={"retry-after-ms": "300"}),
        openai_stream("ok"),
    )
    retries: list[tuple[str, int]] = []
    policy = RetryPolicy(base_delay_s=50.0, max_delay_s=50.0)
    async with OpenAIProvider(model="m", base_url=sse_server.base_url, retry=policy) as provider:
        with anyio.fail_after(30):
            await collect(
                provider, on_retry=lambda reason, attempt: retries.append((reason, attempt))
            )
    first, second = sse_server.requests
    assert second.received_at - first.received_at >= 0.25
    [(reason, attempt)] = retries
    # The delay came from retry-after-ms, not from the policy's 50 s backoff.
    assert attempt == 1 and "retrying in 0.3 s" in reason


async def test_retry_after_is_capped_by_max_delay(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        json_error(429, "later", headers={"retry-after": "3600"}), openai_stream("ok")
    )
    policy = RetryPolicy(base_delay_s=0.0, max_delay_s=0.2)
    async with OpenAIProvider(model="m", base_url=sse_server.base_url, retry=policy) as provider:
        with anyio.fail_after(30):
            assert text_of(await collect(provider)) == "ok"


async def test_500_then_success(sse_server: ScriptedServer, provider: OpenAIProvider) -> None:
    sse_server.enqueue(json_error(500, "oops", type="server_error"), openai_stream("fine"))
    assert text_of(await collect(provider)) == "fine"
    assert len(sse_server.requests) == 2


async def test_no_quota_is_not_retried(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(
        json_error(429, "You exceeded your current quota", code="insufficient_quota"),
        openai_stream("never"),
    )
    with pytest.raises(RateLimitError, match="no quota or credit left") as caught:
        await collect(provider)
    assert not caught.value.retryable
    assert len(sse_server.requests) == 1


async def test_should_retry_header_overrides_the_status(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(
        json_error(500, "do not retry", headers={"x-should-retry": "false"}),
        openai_stream("never"),
    )
    with pytest.raises(ServerError, match="do not retry"):
        await collect(provider)
    assert len(sse_server.requests) == 1


async def test_retries_run_out(sse_server: ScriptedServer, provider: OpenAIProvider) -> None:
    sse_server.enqueue(*[json_error(502, f"bad gateway {i}") for i in range(3)])
    with pytest.raises(RetriesExhaustedError) as caught:
        await collect(provider)
    error = caught.value
    assert error.attempts == 3
    assert isinstance(error.last_error, ServerError)
    assert "gave up after 3 attempts" in str(error)
    assert "bad gateway 2" in str(error)
    assert len(sse_server.requests) == 3


@pytest.mark.parametrize("reply", [dropped_connection(), Reply(body=[Drop(reset=True)])])
async def test_connection_dropped_before_any_event_is_retried(
    sse_server: ScriptedServer, provider: OpenAIProvider, reply: Reply
) -> None:
    sse_server.enqueue(reply, openai_stream("second try"))
    assert text_of(await collect(provider)) == "second try"
    assert len(sse_server.requests) == 2


async def test_stream_without_content_then_drop_is_retried(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    # The role chunk carries no text, so nothing was delivered yet: safe to retry.
    sse_server.enqueue(openai_stream("lost", drop_after=1), openai_stream("kept"))
    assert text_of(await collect(provider)) == "kept"


async def test_drop_mid_stream_raises_stream_interrupted(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(openai_stream("abcdefghij", chunk_size=2, drop_after=3))
    received: list[StreamEvent] = []
    with pytest.raises(StreamInterruptedError) as caught:
        async for event in provider.stream(REQUEST):
            received.append(event)
    assert text_of(received) == "abcd"
    assert caught.value.retryable
    assert "broke" in str(caught.value)
    assert len(sse_server.requests) == 1


async def test_clean_end_before_finish_is_an_interruption(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(openai_stream("partial", finish=None, include_usage=False, done=False))
    with pytest.raises(StreamInterruptedError, match="ended before the model finished"):
        await collect(provider)


async def test_error_object_in_stream_after_output(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    error = sse_event({"error": {"message": "upstream died", "code": 502}})
    start = openai_stream("some ", finish=None, include_usage=False, done=False)
    sse_server.enqueue(Reply(body=[*start.body, error]))
    with pytest.raises(StreamInterruptedError, match="upstream died") as caught:
        await collect(provider)
    assert caught.value.status == 502


async def test_error_object_in_stream_before_output_is_retried(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    error = sse_event({"error": {"message": "overloaded", "type": "server_error"}})
    sse_server.enqueue(Reply(body=[error]), openai_stream("ok"))
    assert text_of(await collect(provider)) == "ok"


async def test_non_retryable_error_object_in_stream(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    error = sse_event({"error": {"message": "prompt too long", "type": "invalid_request_error"}})
    sse_server.enqueue(Reply(body=[error]))
    with pytest.raises(BadRequestError, match="prompt too long"):
        await collect(provider)


async def test_html_page_is_explained(sse_server: ScriptedServer, provider: OpenAIProvider) -> None:
    sse_server.enqueue(Reply(headers={"content-type": "text/html"}, body=[b"<html>hi</html>"]))
    with pytest.raises(ProviderError, match=r"HTML page.*check that the base URL"):
        await collect(provider)


async def test_non_streamed_json_answer_is_explained(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    body = b'{"choices": [{"message": {"content": "hi"}}]}'
    sse_server.enqueue(Reply(headers={"content-type": "application/json"}, body=[body]))
    with pytest.raises(ProviderError, match="ignored `stream: true`"):
        await collect(provider)


async def test_event_that_is_not_json_is_explained(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(Reply(body=[b"data: hello there\n\n"]))
    with pytest.raises(ProviderError, match=r"not a JSON object.*hello there"):
        await collect(provider)


async def test_read_timeout_before_headers_is_retried(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(Reply(headers_delay_s=5.0), openai_stream("patient"))
    timeout = httpx.Timeout(10.0, read=0.3)
    async with OpenAIProvider(
        model="m", base_url=sse_server.base_url, timeout=timeout, retry=FAST_RETRY
    ) as provider:
        assert text_of(await collect(provider)) == "patient"


def _resolver_says_no_such_host(name: str) -> bool:
    try:
        socket.getaddrinfo(name, 80)
    except socket.gaierror as exc:
        return exc.errno == socket.EAI_NONAME
    return False


async def test_a_host_that_does_not_exist_fails_at_once_naming_it() -> None:
    host = "no-such-model-server.invalid"  # RFC 6761: never a host, on every resolver
    require(
        _resolver_says_no_such_host(host),
        f"this machine's resolver does not answer {host} as a name that does not exist",
    )
    policy = RetryPolicy(max_attempts=5, base_delay_s=10.0)  # a retry would hit the timeout
    async with OpenAIProvider(model="m", base_url=f"http://{host}:8080/v1", retry=policy) as p:
        with pytest.raises(ProviderConnectionError) as caught:
            await collect(p)
    assert not caught.value.retryable
    assert f"no host is named {host}" in str(caught.value)
    assert f"check the base URL 'http://{host}:8080/v1'" in str(caught.value)


_ERROR_PAGE = (
    b"<!DOCTYPE HTML>\n<html lang='en'><head><title>Error response</title></head><body>"
    b"<h1>Error response</h1><p>Error code: 501</p><p>Message: Unsupported method "
    b"('POST').</p></body></html>\n"
)


async def test_a_web_server_that_does_not_take_post_is_named_as_the_wrong_address(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    page = {"content-type": "text/html;charset=utf-8"}
    sse_server.enqueue(Reply(status=501, headers=page, body=[_ERROR_PAGE], chunked=False))
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    message = str(caught.value)
    assert not caught.value.retryable
    assert "does not take POST" in message
    assert "HTTP 501: an HTML page titled 'Error response'" in message
    assert f"check that the base URL '{provider.base_url}' is the root of an OpenAI" in message
    assert "<h1>" not in message  # the markup is not quoted at the reader
    assert len(sse_server.requests) == 1


async def test_a_proxys_error_page_is_said_by_its_title_and_retried(
    sse_server: ScriptedServer,
) -> None:
    page = b"<html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body></html>"
    gateway = Reply(status=502, headers={"content-type": "text/html"}, body=[page], chunked=False)
    sse_server.enqueue(gateway, gateway)
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.0)
    async with OpenAIProvider(model="m", base_url=sse_server.base_url, retry=policy) as p:
        with pytest.raises(RetriesExhaustedError) as caught:
            await collect(p)
    assert "the server failed (HTTP 502: an HTML page titled '502 Bad Gateway')" in str(
        caught.value
    )


async def test_connection_refused_exhausts_retries_with_a_clear_message() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.0)
    async with OpenAIProvider(model="m", base_url=f"http://127.0.0.1:{port}/v1", retry=policy) as p:
        with pytest.raises(RetriesExhaustedError) as caught:
            await collect(p)
    assert isinstance(caught.value.last_error, ProviderConnectionError)
    assert "could not connect" in str(caught.value)
    assert "check that the server is running" in str(caught.value)


def stalled_after_first_text() -> Reply:
    """A stream that sends "first " and then stalls for a minute."""
    reply = openai_stream("first second", chunk_size=6)
    return Reply(body=[*reply.body[:2], Pause(60), *reply.body[2:]])


@pytest.mark.timeout(60)
async def test_cancellation_closes_the_connection(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(stalled_after_first_text())
    received: list[StreamEvent] = []
    with anyio.move_on_after(30) as scope:
        async for event in provider.stream(REQUEST):
            received.append(event)
            if isinstance(event, TextDelta):
                scope.cancel()
    assert received == [TextDelta("first ")]
    assert await anyio.to_thread.run_sync(sse_server.wait_for_disconnect, 10.0)


async def test_leaving_the_stream_early_closes_the_connection(
    sse_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    sse_server.enqueue(stalled_after_first_text())
    async with aclosing(provider.stream(REQUEST)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                break
    assert await anyio.to_thread.run_sync(sse_server.wait_for_disconnect, 10.0)


async def test_a_callers_client_is_used_and_left_open(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("ok"))
    async with httpx.AsyncClient(headers={"x-from": "caller"}) as client:
        async with OpenAIProvider(
            model="m", base_url=sse_server.base_url, http_client=client, headers={"x-extra": "1"}
        ) as provider:
            await collect(provider)
        assert not client.is_closed
    sent = sse_server.requests[0].headers
    assert (sent["x-from"], sent["x-extra"]) == ("caller", "1")


@pytest.mark.parametrize("url", ["api.openai.com/v1", "ftp://host/v1", "http://"])
def test_invalid_base_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="base URL"):
        OpenAIProvider(model="m", base_url=url)


def test_context_window_from_the_table_or_the_caller() -> None:
    assert OpenAIProvider(model="gpt-4o-2024-08-06", api_key="").context_window == 128_000
    assert OpenAIProvider(model="local-gguf", api_key="").context_window is None
    assert (
        OpenAIProvider(model="local-gguf", api_key="", context_window=4096).context_window == 4096
    )


async def test_options_are_given_by_keyword(sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("hi"))
    async with OpenAIProvider(
        model="local-m", base_url=f"{sse_server.base_url}/v1", api_key="sk-kw"
    ) as provider:
        assert text_of(await collect(provider)) == "hi"
    request = sse_server.requests[0]
    assert request.headers["authorization"] == "Bearer sk-kw"
    assert request.json["model"] == "local-m"
    with pytest.raises(TypeError):
        OpenAIProvider(f"{sse_server.base_url}/v1", "sk-positional")
    assert OpenAIProvider(api_key="").model == DEFAULT_MODEL
