"""OpenAI-compatible chat completions, streamed: OpenAI, OpenRouter, vLLM, llama.cpp, Ollama…

`base_url` is used as given and `/chat/completions` is appended, as the official SDK does:
for OpenAI it is `https://api.openai.com/v1`, for a local llama.cpp server
`http://127.0.0.1:8080/v1`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, Unpack

from logos.providers.base import ModelRequest, ReasoningDelta, StreamEvent, TextDelta, Usage
from logos.providers.http_errors import Endpoint, error_from_object, parse_event_json
from logos.providers.http_provider import (
    ConnectionOptions,
    HTTPProvider,
    TurnParser,
    WireFormat,
    token_count,
)
from logos.providers.sse import ServerSentEvent

DEFAULT_MODEL = "gpt-5"
"""The model asked for when none is named (a local server serves its own; name it)."""
DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"

TokenLimitField = Literal["max_tokens", "max_completion_tokens"]

# WHY: OpenAI's reasoning models refuse `max_tokens` and demand `max_completion_tokens`,
# while llama.cpp, Ollama and older servers only know `max_tokens`.
_REASONING_FAMILIES = ("o1", "o3", "o4", "gpt-5")


class _Turn(TurnParser):
    """One streamed answer: its deltas, what finished it and what it used."""

    finish_reasons = MappingProxyType(
        {
            "stop": "stop",
            "length": "length",
            "content_filter": "content_filter",
        }
    )

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self._usage: Mapping[str, Any] | None = None

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        if event.data.strip() == "[DONE]":
            self.done = True
            return []
        chunk = parse_event_json(self.endpoint, event)
        if chunk.get("error"):
            raise error_from_object(self.endpoint, chunk["error"])
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return []
        items: list[StreamEvent] = []
        for choice in choices:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                # WHY one field: servers name reasoning `reasoning_content` (llama.cpp,
                # DeepSeek, vLLM) or `reasoning` (OpenRouter, newer vLLM); some send both.
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    items.append(ReasoningDelta(reasoning))
                content = delta.get("content")
                if isinstance(content, str) and content:
                    items.append(TextDelta(content))
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_raw = finish
        return items

    def usage(self) -> Usage:
        return _usage(self._usage)


class OpenAIProvider(HTTPProvider):
    """Streams chat completions from any OpenAI-compatible server.

    No API key (argument or `OPENAI_API_KEY`) means no Authorization header, which is what
    local servers expect; the other keywords are `ConnectionOptions`.
    """

    name = "openai"
    wire = WireFormat(
        api="OpenAI-compatible chat completions",
        path="/chat/completions",
        default_model=DEFAULT_MODEL,
        default_base_url=DEFAULT_BASE_URL,
        base_url_env=BASE_URL_ENV,
        api_key_env=API_KEY_ENV,
        auth_headers=lambda key: {"authorization": f"Bearer {key}"},
    )
    turn_parser = _Turn

    def __init__(
        self,
        *,
        token_limit_field: TokenLimitField | None = None,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        """`token_limit_field` names the body field for `max_tokens`; by default
        `max_completion_tokens` for OpenAI reasoning models (o1, o3, o4, gpt-5) and
        `max_tokens` for everything else."""
        super().__init__(**connection)
        self._token_limit_field: TokenLimitField = token_limit_field or (
            "max_completion_tokens" if _is_reasoning_family(self.model) else "max_tokens"
        )

    def _wire_body(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend({"role": m.role, "content": m.content} for m in request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.max_tokens is not None:
            body[self._token_limit_field] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.stop:
            body["stop"] = list(request.stop)
        return body


def _usage(raw: Mapping[str, Any] | None) -> Usage:
    if raw is None:
        return Usage()
    prompt_details = _mapping(raw.get("prompt_tokens_details"))
    completion_details = _mapping(raw.get("completion_tokens_details"))
    prompt = token_count(raw.get("prompt_tokens"))
    # WHY the fallback: DeepSeek reports its cache hits in its own field.
    cache_read = token_count(prompt_details.get("cached_tokens")) or token_count(
        raw.get("prompt_cache_hit_tokens")
    )
    cache_write = token_count(prompt_details.get("cache_write_tokens"))
    cost = raw.get("cost")
    reported_cost = None if isinstance(cost, bool) or not isinstance(cost, int | float) else cost
    return Usage(
        # WHY subtract: OpenAI's prompt_tokens include cached tokens; ours do not.
        input_tokens=max(prompt - cache_read - cache_write, 0),
        output_tokens=token_count(raw.get("completion_tokens")),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=token_count(completion_details.get("reasoning_tokens")),
        cost_usd=None if reported_cost is None else float(reported_cost),
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _is_reasoning_family(model: str) -> bool:
    # WHY no vendor-prefix stripping: "openai/gpt-5" means a router such as OpenRouter,
    # which takes the plain `max_tokens` for every model.
    name = model.lower()
    return any(
        name == family or name.startswith((f"{family}-", f"{family}."))
        for family in _REASONING_FAMILIES
    )
