"""Anthropic Messages, streamed, with extended thinking sent back as the API requires.

`base_url` is the server root and `/v1/messages` is appended, as the official SDK does:
`https://api.anthropic.com` by default, `http://127.0.0.1:8080` for a local llama.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Unpack

from logos.errors import BadRequestError
from logos.providers.base import (
    Message,
    ModelRequest,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    StreamEvent,
    TextDelta,
    Usage,
)
from logos.providers.http_errors import Endpoint, error_from_object, parse_event_json
from logos.providers.http_provider import (
    ConnectionOptions,
    HTTPProvider,
    TurnParser,
    WireFormat,
    token_count,
)
from logos.providers.sse import ServerSentEvent

DEFAULT_MODEL = "claude-sonnet-4-5"
"""The model asked for when none is named."""
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
_API_VERSION = "2023-06-01"
_DEFAULT_MAX_TOKENS = 8192
"""Anthropic requires `max_tokens` on every request; this is used when a request has none."""
_MIN_THINKING_BUDGET = 1024
"""The smallest thinking budget the API accepts."""


class _Turn(TurnParser):
    """The state machine of one streamed Messages answer."""

    finish_reasons = MappingProxyType(
        {
            "end_turn": "stop",
            "stop_sequence": "stop",
            "max_tokens": "length",
            "model_context_window_exceeded": "length",
            "refusal": "content_filter",
        }
    )

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self._usage: dict[str, Any] = {}

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        data = parse_event_json(self.endpoint, event)
        kind = data.get("type") or event.event
        if kind == "error":
            raise error_from_object(self.endpoint, data.get("error", data))
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping):
                self._merge_usage(message.get("usage"))
        elif kind == "content_block_start":
            return _block_start_events(data.get("content_block"))
        elif kind == "content_block_delta":
            return _delta_events(data.get("delta"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
                self.finish_raw = delta["stop_reason"]
            self._merge_usage(data.get("usage"))
        elif kind == "message_stop":
            self.done = True
        # ping, content_block_stop and event types newer than this code carry nothing we use.
        return []

    def _merge_usage(self, usage: Any) -> None:
        # WHY merge: message_start has the input counts, message_delta the cumulative output
        # count (and, on newer servers, final input counts too); later values win.
        if isinstance(usage, Mapping):
            self._usage.update({k: v for k, v in usage.items() if v is not None})

    def usage(self) -> Usage:
        return Usage(
            input_tokens=token_count(self._usage.get("input_tokens")),
            output_tokens=token_count(self._usage.get("output_tokens")),
            cache_read_tokens=token_count(self._usage.get("cache_read_input_tokens")),
            cache_write_tokens=token_count(self._usage.get("cache_creation_input_tokens")),
        )


class AnthropicProvider(HTTPProvider):
    """Streams Anthropic Messages; `thinking_budget` turns on extended thinking.

    No API key (argument or `ANTHROPIC_API_KEY`) means no `x-api-key` header, for local
    servers that speak this API; the other keywords are `ConnectionOptions`.
    """

    name = "anthropic"
    wire = WireFormat(
        api="Anthropic Messages",
        path="/v1/messages",
        default_model=DEFAULT_MODEL,
        default_base_url=DEFAULT_BASE_URL,
        base_url_env=BASE_URL_ENV,
        api_key_env=API_KEY_ENV,
        auth_headers=lambda key: {"x-api-key": key},
        fixed_headers={"anthropic-version": _API_VERSION},
    )
    turn_parser = _Turn

    def __init__(
        self,
        *,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
        thinking_budget: int | None = None,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if thinking_budget is not None:
            _check_thinking_budget(thinking_budget, max_tokens, error=ValueError)
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        super().__init__(**connection)

    def _wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages body for `request`; raises BadRequestError for a request the API
        would refuse with thinking on (budget not below max_tokens, temperature not 1)."""
        max_tokens = self.max_tokens if request.max_tokens is None else request.max_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": _wire_messages(request.messages),
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if self.thinking_budget is not None:
            _check_thinking_budget(self.thinking_budget, max_tokens, error=BadRequestError)
            if request.temperature not in (None, 1):
                raise BadRequestError(
                    f"temperature {request.temperature} cannot be used with extended thinking "
                    "(the API accepts only 1): leave temperature unset or turn thinking off"
                )
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        return body


def _wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The `messages` array: reasoning first in each assistant turn, roles alternating.

    WHY merge: the API wants user and assistant turns to alternate; consecutive turns of
    one role become one turn whose content blocks keep their order.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        blocks = _content_blocks(message)
        if wire and wire[-1]["role"] == message.role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": message.role, "content": blocks})
    for turn in wire:
        content = turn["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            turn["content"] = content[0]["text"]
    return wire


def _content_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.role == "assistant":
        # WHY only signed reasoning: the API rejects a thinking block without its signature.
        if message.reasoning is not None and message.reasoning_signature:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": message.reasoning,
                    "signature": message.reasoning_signature,
                }
            )
        blocks.extend({"type": "redacted_thinking", "data": d} for d in message.redacted_reasoning)
    # WHY: the API refuses empty text blocks; a turn of reasoning alone is fine without one.
    if message.content or not blocks:
        blocks.append({"type": "text", "text": message.content})
    return blocks


def _check_thinking_budget(budget: int, max_tokens: int, *, error: type[Exception]) -> None:
    if budget < _MIN_THINKING_BUDGET:
        raise error(f"thinking_budget must be at least {_MIN_THINKING_BUDGET} tokens, got {budget}")
    if budget >= max_tokens:
        raise error(
            f"thinking_budget ({budget}) must be below max_tokens ({max_tokens}), since "
            "thinking counts toward it: raise max_tokens or lower thinking_budget"
        )


def _block_start_events(block: Any) -> list[StreamEvent]:
    if not isinstance(block, Mapping):
        return []
    kind = block.get("type")
    items: list[StreamEvent] = []
    if kind == "text" and block.get("text"):
        items.append(TextDelta(str(block["text"])))
    elif kind == "thinking":
        if block.get("thinking"):
            items.append(ReasoningDelta(str(block["thinking"])))
        if block.get("signature"):
            items.append(ReasoningSignature(str(block["signature"])))
    elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
        items.append(RedactedReasoning(block["data"]))
    return items


def _delta_events(delta: Any) -> list[StreamEvent]:
    if not isinstance(delta, Mapping):
        return []
    kind = delta.get("type")
    if kind == "text_delta" and delta.get("text"):
        return [TextDelta(str(delta["text"]))]
    if kind == "thinking_delta" and delta.get("thinking"):
        return [ReasoningDelta(str(delta["thinking"]))]
    if kind == "signature_delta" and delta.get("signature"):
        return [ReasoningSignature(str(delta["signature"]))]
    # input_json_delta (tool use) and citations_delta: logos sends no tools and no documents.
    return []
