"""Both providers against the real llama.cpp server (xllamacpp) running a small GGUF model.

The model is tiny and weak: these tests check the wire (streaming, usage, limits, stop
sequences), never the quality of what it says.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from logos.errors import AuthenticationError, ContextWindowExceededError, LocalModelError
from logos.models.llama_server import LocalModelServer
from logos.providers import (
    AnthropicProvider,
    Finish,
    Message,
    ModelRequest,
    OpenAIProvider,
    Provider,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    UsageReport,
)

NO_RETRY = RetryPolicy(max_attempts=1)
GREEDY = {"seed": 1, "top_k": 1}

ProviderFactory = Callable[[LocalModelServer], Provider]


def openai_for(server: LocalModelServer) -> Provider:
    return OpenAIProvider(
        model=server.model_name,
        base_url=server.openai_base_url,
        api_key=server.api_key,
        retry=NO_RETRY,
    )


def anthropic_for(server: LocalModelServer) -> Provider:
    return AnthropicProvider(
        model=server.model_name, base_url=server.base_url, api_key=server.api_key, retry=NO_RETRY
    )


BOTH = pytest.mark.parametrize("make", [openai_for, anthropic_for], ids=["openai", "anthropic"])


async def run_turn(provider: Provider, request: ModelRequest) -> list[StreamEvent]:
    try:
        return [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def ask(prompt: str, **options: object) -> ModelRequest:
    return ModelRequest(
        system="You are a helpful assistant.",
        messages=[Message("user", prompt)],
        temperature=0.0,
        extra=GREEDY,
        **options,  # type: ignore[arg-type]
    )


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
@BOTH
async def test_streams_text_and_reports_usage(
    llama_server: LocalModelServer, make: ProviderFactory
) -> None:
    events = await run_turn(make(llama_server), ask("Say hello.", max_tokens=24))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2, events
    usage_reports = [e for e in events if isinstance(e, UsageReport)]
    assert len(usage_reports) == 1
    usage = usage_reports[0].usage
    assert usage.total_input_tokens > 0
    assert 0 < usage.output_tokens <= 24
    assert isinstance(events[-1], Finish)
    assert events[-1].reason in ("stop", "length")


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
@BOTH
async def test_max_tokens_ends_with_length(
    llama_server: LocalModelServer, make: ProviderFactory
) -> None:
    request = ask("Write a long story about a dragon and a castle.", max_tokens=5)
    events = await run_turn(make(llama_server), request)
    assert events[-1] == Finish("length", events[-1].raw)  # type: ignore[union-attr]
    [report] = [e for e in events if isinstance(e, UsageReport)]
    assert 0 < report.usage.output_tokens <= 5


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
@BOTH
async def test_a_conversation_longer_than_the_window_is_a_context_window_error(
    llama_server: LocalModelServer, make: ProviderFactory
) -> None:
    # About 3x the server's 4096-token window: the loop elides old outputs on this error.
    long_prompt = "Summarize these numbers: " + " ".join(str(n) for n in range(6000))
    with pytest.raises(ContextWindowExceededError):
        await run_turn(make(llama_server), ask(long_prompt, max_tokens=8))


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
@BOTH
async def test_stop_sequence_is_honoured(
    llama_server: LocalModelServer, make: ProviderFactory
) -> None:
    prompt = "Count from one to twenty in words, separated by commas."
    reference = text_of(await run_turn(make(llama_server), ask(prompt, max_tokens=40)))
    # A word from the middle of the greedy answer: the same request stopped there must end
    # right before it.
    words = [w.strip(",.!") for w in reference.split()]
    candidates = [w for w in words[2:] if len(w) >= 3 and w.isalpha()]
    assert candidates, f"the model's answer has no usable stop word: {reference!r}"
    stop = candidates[0]
    events = await run_turn(make(llama_server), ask(prompt, max_tokens=40, stop=[stop]))
    text = text_of(events)
    assert stop not in text
    assert reference.startswith(text), (reference, text)
    assert len(text) < reference.index(stop) + 1
    assert isinstance(events[-1], Finish)
    assert events[-1].reason == "stop"


@pytest.mark.llama
@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_the_server_refuses_requests_without_its_key(
    llama_server: LocalModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = OpenAIProvider(model=llama_server.model_name, base_url=llama_server.openai_base_url)
    with pytest.raises(AuthenticationError, match="none was sent"):
        await run_turn(provider, ask("hi", max_tokens=2))
    assert llama_server.base_url.startswith("http://127.0.0.1:")


@pytest.mark.llama
@pytest.mark.timeout(120)
@pytest.mark.usefixtures("xllamacpp_installed")
def test_a_file_that_is_not_a_model_is_explained(tmp_path_factory: pytest.TempPathFactory) -> None:
    bogus = tmp_path_factory.mktemp("models") / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file")
    server = LocalModelServer(bogus, threads=1)
    with pytest.raises(LocalModelError, match="could not serve"):
        server.start()
    assert not server.running


@pytest.mark.usefixtures("xllamacpp_installed")
def test_a_missing_file_is_explained(tmp_path_factory: pytest.TempPathFactory) -> None:
    missing = tmp_path_factory.mktemp("models") / "absent.gguf"
    with pytest.raises(LocalModelError, match="GGUF model file not found"):
        LocalModelServer(missing).start()


def test_missing_xllamacpp_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # None in sys.modules makes `import xllamacpp` raise ImportError.
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    model = tmp_path_factory.mktemp("models") / "m.gguf"
    with pytest.raises(
        LocalModelError, match=r"needs the xllamacpp package .*: pip install xllamacpp"
    ):
        LocalModelServer(model).start()


def test_base_url_before_start_is_an_error(tmp_path_factory: pytest.TempPathFactory) -> None:
    server = LocalModelServer(tmp_path_factory.mktemp("models") / "m.gguf")
    with pytest.raises(RuntimeError, match="call start"):
        _ = server.base_url
