"""The HTTP provider base: connect, POST a request, stream its server-sent events, retry,
close.

A provider built on it holds only its wire format: where the API lives, the request body,
and what its events mean; what a failure means is decided in `logos.providers.http_errors`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

import httpx

from logos.closing import AsyncCloseable
from logos.providers.base import (
    Finish,
    FinishReason,
    ModelRequest,
    OnRetry,
    StreamEvent,
    Usage,
    UsageReport,
)
from logos.providers.http_errors import (
    Endpoint,
    error_from_transport,
    raise_for_answer,
    stream_ended_early,
)
from logos.providers.pricing import context_window_for
from logos.providers.retry import RetryPolicy, retrying
from logos.providers.sse import ServerSentEvent, aiter_sse
from logos.tls import tls_for

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""10 s to connect; 600 s for everything else, since a local model on a CPU can think for
minutes before its first token (read timeouts apply between received bytes)."""


@dataclass(frozen=True)
class WireFormat:
    """What tells one HTTP API apart when a provider is set up: where it lives, which
    variables configure it, and how a key is sent."""

    api: str
    """A human name of the wire format, for error messages."""
    path: str
    """Appended to the base URL for the streaming endpoint."""
    default_model: str
    """The model asked for when none is named."""
    default_base_url: str
    base_url_env: str
    api_key_env: str
    auth_headers: Callable[[str], dict[str, str]]
    fixed_headers: Mapping[str, str] = field(default_factory=dict)


class ConnectionOptions(TypedDict, total=False):
    """The keywords every HTTP provider takes, for where and how it connects.

    `model` defaults to the wire format's default model; `base_url` and `api_key` to their
    environment variables, then to the API's defaults (no key sends no key header, which is
    what local servers expect). `timeout` applies to every request, also on a caller's
    `http_client`, which the provider then uses but never closes. `headers` are sent with
    every request, over logos' own. `context_window` overrides the known window of `model`.
    """

    model: str
    base_url: str | None
    api_key: str | None
    timeout: float | httpx.Timeout
    retry: RetryPolicy | None
    http_client: httpx.AsyncClient | None
    headers: Mapping[str, str] | None
    context_window: int | None


class TurnParser(ABC):
    """Turns one answer's server-sent events into stream events; a wire format subclasses
    it with what its events mean and how it reports usage."""

    finish_reasons: ClassVar[Mapping[str, FinishReason]]
    """The wire format's finish reasons in logos' words; any other one is "other"."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.done = False
        """True once the server marked the end of the answer; nothing after it is read."""
        self.finish_raw: str | None = None
        """Why the answer ended, in the server's words, once it said so."""

    @abstractmethod
    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        """The stream events one server-sent event carries; raises for an error event."""

    @abstractmethod
    def usage(self) -> Usage:
        """What the turn used, as the server reported it (zeros for what it did not)."""

    def finish(self) -> list[StreamEvent]:
        """The closing events, or an error when the stream stopped before the answer did."""
        if not self.done and self.finish_raw is None:
            raise stream_ended_early(self.endpoint)
        raw = self.finish_raw
        reason: FinishReason = self.finish_reasons.get(raw, "other") if raw else "other"
        return [UsageReport(self.usage()), Finish(reason, raw)]


class HTTPProvider(AsyncCloseable, ABC):
    """What the streaming HTTP providers share: the connection settings, one turn's retried
    stream, and the HTTP client's lifecycle (a client passed in is used and left open; a
    client the provider made is closed by `aclose()` or `async with`). A provider supplies
    its wire format, its request body and its parser."""

    name: str
    wire: ClassVar[WireFormat]
    turn_parser: ClassVar[type[TurnParser]]
    model: str
    base_url: str
    context_window: int | None

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        context_window: int | None = None,
    ) -> None:
        """Settings come from the arguments first, then the environment, then the API's
        defaults (see `ConnectionOptions`)."""
        wire = self.wire
        self.model = wire.default_model if model is None else model
        self.context_window = context_window or context_window_for(self.model)
        self.base_url = normalize_base_url(
            base_url or os.environ.get(wire.base_url_env) or wire.default_base_url
        )
        key = api_key if api_key is not None else os.environ.get(wire.api_key_env)
        self._headers = {"accept": "text/event-stream", **wire.fixed_headers}
        if key:
            self._headers.update(wire.auth_headers(key))
        self._headers.update(headers or {})
        self._endpoint = Endpoint(
            api=wire.api,
            model=self.model,
            base_url=self.base_url,
            url=f"{self.base_url}{wire.path}",
            api_key_env=wire.api_key_env,
            key_sent=bool(key),
            timeout=as_timeout(timeout),
        )
        self._retry = retry or RetryPolicy()
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(
            timeout=self._endpoint.timeout, verify=tls_for(self.base_url)
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for `request` (exposed so callers can log or inspect it): the
        wire format's body with the request's `extra` merged in last."""
        body = self._wire_body(request)
        merge_extra(body, request.extra)
        return body

    @abstractmethod
    def _wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The body this wire format sends for `request`, before `extra` is merged in."""

    async def stream(
        self, request: ModelRequest, on_retry: OnRetry | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        body = self.request_body(request)

        def attempt() -> AsyncGenerator[StreamEvent, None]:
            turn = self.turn_parser(self._endpoint)
            return stream_turn(self._client, self._endpoint, self._headers, body, turn)

        async with aclosing(retrying(attempt, self._retry, on_retry)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def normalize_base_url(base_url: str) -> str:
    """The base URL without trailing slashes; refuses anything but http(s) with a host."""
    stripped = base_url.strip().rstrip("/")
    try:
        url = httpx.URL(stripped)
    except httpx.InvalidURL as exc:
        raise ValueError(
            f"invalid base URL {base_url!r} ({exc}): give e.g. http://127.0.0.1:8080/v1"
        ) from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(
            f"invalid base URL {base_url!r}: it must start with http:// or https:// and "
            "name a host, e.g. http://127.0.0.1:8080/v1"
        )
    return stripped


def as_timeout(timeout: float | httpx.Timeout) -> httpx.Timeout:
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)


async def post_sse(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
) -> AsyncGenerator[ServerSentEvent, None]:
    """POSTs `body` as JSON and yields the server-sent events of the answer.

    Closing or cancelling the iteration closes the response and its connection at once.
    """
    try:
        async with client.stream(
            "POST", endpoint.url, json=body, headers=headers, timeout=endpoint.timeout
        ) as response:
            await raise_for_answer(endpoint, response)
            async with aclosing(aiter_sse(response.aiter_bytes())) as events:
                async for event in events:
                    yield event
    except httpx.RequestError as exc:
        raise error_from_transport(endpoint, exc) from exc


async def stream_turn(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    turn: TurnParser,
) -> AsyncGenerator[StreamEvent, None]:
    """One attempt at one answer: POST, parse, and close the connection when done."""
    async with aclosing(post_sse(client, endpoint, headers=headers, body=body)) as events:
        async for event in events:
            for item in turn.feed(event):
                yield item
            if turn.done:
                # WHY stop reading: a server or proxy that keeps the connection open after
                # the end marker must not hang the turn.
                break
    for item in turn.finish():
        yield item


def merge_extra(body: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Caller's fields win over ours; a None value removes ours (for servers that refuse a
    field logos sends, e.g. `stream_options`)."""
    for key, value in extra.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value


def token_count(value: Any) -> int:
    """A token count from a JSON usage object: absent, null or malformed counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(int(value), 0)
