"""What an HTTP model API's failures mean: each answer, error object or broken connection
classified into a `ProviderError`.

Every failure leaves here as a `ProviderError` whose message says what went wrong, quotes
the server's own words, and says what to do; `retryable` marks the ones worth another try.
"""

from __future__ import annotations

import html
import json
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from logos.errors import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    NotFoundError,
    PermissionDeniedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
    cause_of,
)
from logos.providers.retry import parse_retry_after
from logos.providers.sse import ServerSentEvent
from logos.tls import tls_problem

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})

_MAX_ERROR_BODY_BYTES = 64 * 1024
_MAX_QUOTED_CHARS = 500

# WHY: in-stream errors carry a type name but no HTTP status; these are the statuses the
# same failure would have had as a response, so both paths share one classification.
_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_NO_QUOTA_CODES = frozenset({"insufficient_quota", "billing_error"})
_CONTEXT_EXCEEDED_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
# WHY also the text: servers that send no such code say it in words. OpenAI and vLLM:
# "maximum context length is N tokens"; Anthropic: "prompt is too long: N tokens > M
# maximum"; llama.cpp: "the request exceeds the available context size".
_CONTEXT_EXCEEDED = re.compile(
    r"maximum context length|exceeds? the (?:available |maximum )?context"
    r"|context (?:length|size|window) (?:is )?exceeded|prompt is too long"
    r"|too many (?:input )?tokens",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Endpoint:
    """Where a provider sends its requests, and what error messages need to name."""

    api: str
    """A human name of the wire format, e.g. "OpenAI-compatible chat completions"."""
    model: str
    base_url: str
    url: str
    api_key_env: str
    key_sent: bool
    timeout: httpx.Timeout


async def raise_for_answer(endpoint: Endpoint, response: httpx.Response) -> None:
    """Raise what an answer that is not an event stream means: a redirect, an error status,
    one JSON document, an HTML page."""
    status = response.status_code
    if 300 <= status < 400:
        location = response.headers.get("location", "another address")
        raise ProviderError(
            f"the server redirected POST {endpoint.url} to {location} (HTTP {status}): "
            "use the final address as the base URL",
            status=status,
        )
    if status >= 400:
        raw = await _read_bounded(response)
        raise error_from_status(endpoint, status, response.headers, raw)
    content_type = response.headers.get("content-type", "").lower()
    if content_type.startswith("application/json"):
        raw = await _read_bounded(response)
        document = _load_json(raw)
        if isinstance(document, dict) and "error" in document:
            raise error_from_object(endpoint, document["error"])
        raise ProviderError(
            f"{endpoint.url} answered with one JSON document instead of an event stream "
            f"({_quote(raw)}): the server ignored `stream: true`; check that the base URL "
            f"points at an {endpoint.api} API that can stream",
        )
    if content_type.startswith("text/html"):
        raw = await _read_bounded(response)
        raise ProviderError(
            f"{endpoint.url} answered with {_describe_page(raw) or 'an HTML page'}, not an "
            f"event stream: check that the base URL points at an {endpoint.api} API"
        )


async def _read_bounded(response: httpx.Response) -> bytes:
    # WHY bounded: an error page can be arbitrarily large; its first 64 KiB say enough.
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= _MAX_ERROR_BODY_BYTES:
            break
    return bytes(body[:_MAX_ERROR_BODY_BYTES])


def parse_event_json(endpoint: Endpoint, event: ServerSentEvent) -> dict[str, Any]:
    """The event's data as a JSON object, or a ProviderError naming what was sent."""
    value = _load_json(event.data)
    if not isinstance(value, dict):
        raise ProviderError(
            f"the server sent an event that is not a JSON object "
            f"({_quote(event.data.encode())}): check that the base URL points at an "
            f"{endpoint.api} API"
        )
    return value


@dataclass(frozen=True)
class _ServerDetail:
    message: str
    codes: frozenset[str] = frozenset()
    """The error's `code` and `type`, e.g. {"insufficient_quota"}."""
    request_id: str = ""


def _load_json(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _server_detail(raw: bytes) -> _ServerDetail:
    """The error message and codes in an error body, whatever shape the server chose."""
    document = _load_json(raw)
    if not isinstance(document, dict):
        return _ServerDetail(_describe_page(raw) or _quote(raw))
    request_id = str(document.get("request_id") or "")
    error = document.get("error")
    if isinstance(error, dict):
        detail = _error_object_detail(error)
        return _ServerDetail(detail.message, detail.codes, request_id)
    if isinstance(error, str) and error:
        return _ServerDetail(_shorten(error), request_id=request_id)
    for key in ("message", "detail"):
        if document.get(key):
            return _ServerDetail(_shorten(str(document[key])), request_id=request_id)
    return _ServerDetail(_quote(raw), request_id=request_id)


def _error_object_detail(error: Mapping[str, Any]) -> _ServerDetail:
    message = error.get("message") or json.dumps(error, ensure_ascii=False)
    codes = frozenset(
        str(part) for part in (error.get("code"), error.get("type")) if part not in (None, "")
    )
    return _ServerDetail(_shorten(str(message)), codes)


def error_from_status(
    endpoint: Endpoint, status: int, headers: Mapping[str, str], raw: bytes
) -> ProviderError:
    """The error for an HTTP error response (status >= 400)."""
    detail = _server_detail(raw)
    request_id = headers.get("request-id") or headers.get("x-request-id") or detail.request_id or ""
    error = _classify(endpoint, status, detail, request_id)
    error.retry_after_s = parse_retry_after(headers)
    # WHY: OpenAI and Anthropic tell clients explicitly when a retry is (not) worth it.
    should_retry = headers.get("x-should-retry", "").strip().lower()
    if should_retry in ("true", "false"):
        error.retryable = should_retry == "true"
    return error


def error_from_object(endpoint: Endpoint, error: Any) -> ProviderError:
    """The error for an error object sent in the event stream or with a success status."""
    if isinstance(error, Mapping):
        detail = _error_object_detail(error)
        code, kind = error.get("code"), error.get("type")
    else:
        detail = _ServerDetail(_shorten(str(error)))
        code = kind = None
    if isinstance(code, int) and 400 <= code <= 599:
        status = code
    else:
        status = _STATUS_OF_ERROR_TYPE.get(str(kind), 0) or _STATUS_OF_ERROR_TYPE.get(str(code), 0)
    if not status:
        return ProviderError(
            f"the server reported an error ({detail.message}); it names no HTTP status or "
            "error type logos knows, so it is not retried"
        )
    return _classify(endpoint, status, detail, "")


def _classify(
    endpoint: Endpoint, status: int, detail: _ServerDetail, request_id: str
) -> ProviderError:
    message = detail.message
    said = f"HTTP {status}: {message}" if message else f"HTTP {status} with no error message"
    if request_id:
        said += f"; request id {request_id}"
    retryable = status in RETRYABLE_STATUSES
    if status == 401:
        if not endpoint.key_sent:
            return AuthenticationError(
                f"the server requires an API key and none was sent ({said}): "
                f"set {endpoint.api_key_env} or pass api_key",
                status,
            )
        return AuthenticationError(
            f"the API key was rejected ({said}): check {endpoint.api_key_env}", status
        )
    if status == 403:
        return PermissionDeniedError(
            f"permission denied for model '{endpoint.model}' ({said}): check that the API "
            f"key may use this model and POST {endpoint.url}",
            status,
        )
    if status in (405, 501):  # WHY: POST is not what that address takes: not an API's
        return ProviderError(
            f"the server does not take POST at {endpoint.url} ({said}): check that the base "
            f"URL '{endpoint.base_url}' is the root of an {endpoint.api} API, not a web "
            "page's address",
            status,
        )
    if status == 404:
        return NotFoundError(
            f"unknown model '{endpoint.model}' or wrong base URL '{endpoint.base_url}' "
            f"(the server answered 404 for POST {endpoint.url}"
            f"{': ' + message if message else ''}): check the model name and the base URL",
            status,
        )
    if status in (400, 413, 422) and _says_context_exceeded(detail):
        return ContextWindowExceededError(
            f"the conversation does not fit the model's context window ({said}): start a "
            "new conversation, or give the provider its context_window so that old command "
            "outputs are elided in time",
            status,
        )
    if status == 413:
        return BadRequestError(
            f"the request is too large ({said}): shorten the conversation or lower max_tokens",
            status,
        )
    if status in (400, 422):
        return BadRequestError(
            f"the server rejected the request ({said}): change what the message names "
            "(model options or conversation) and send it again",
            status,
        )
    if status == 429:
        if detail.codes & _NO_QUOTA_CODES:
            return RateLimitError(
                f"the account has no quota or credit left ({said}): check the plan and "
                f"billing of the key in {endpoint.api_key_env}",
                status,
            )
        return RateLimitError(f"rate limited ({said})", status, retryable)
    if status == 408:
        return ProviderError(f"the server timed out reading the request ({said})", status, True)
    if status == 529:
        return ServerError(f"the API is overloaded ({said})", status, retryable)
    if status == 503:
        return ServerError(f"the server is unavailable ({said})", status, retryable)
    if status >= 500:
        return ServerError(f"the server failed ({said})", status, retryable)
    return ProviderError(f"the server refused the request ({said})", status, retryable)


def _says_context_exceeded(detail: _ServerDetail) -> bool:
    return bool(detail.codes & _CONTEXT_EXCEEDED_CODES) or bool(
        _CONTEXT_EXCEEDED.search(detail.message)
    )


def error_from_transport(endpoint: Endpoint, exc: httpx.RequestError) -> ProviderError:
    """The error for a failure below HTTP: connecting, sending, receiving."""
    why = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ProviderError(
            f"cannot send to {endpoint.url} ({why}): the base URL must start with http:// or "
            "https://"
        )
    problem = tls_problem(endpoint.base_url, exc)
    if problem is not None:
        return ProviderConnectionError(f"cannot send to {endpoint.url}: {problem}")
    unknown = cause_of(exc, socket.gaierror)
    if unknown is not None and unknown.errno == socket.EAI_NONAME:
        return ProviderConnectionError(
            f"cannot send to {endpoint.url}: no host is named {httpx.URL(endpoint.url).host} "
            f"({unknown.strerror}): check the base URL '{endpoint.base_url}'"
        )
    failure = _connection_failure(endpoint, exc, why)
    if failure is None:
        return ProviderError(f"the request to {endpoint.url} failed ({why})")
    return ProviderConnectionError(failure, retryable=True)


_ErrorTypes = type[httpx.RequestError] | tuple[type[httpx.RequestError], ...]
_CONNECTION_FAILURES: tuple[tuple[_ErrorTypes, str], ...] = (
    (httpx.ConnectTimeout, "timed out connecting to {url} after {connect} s: {check_server}"),
    (
        httpx.ReadTimeout,
        "no data from {url} for {read} s: the server may be overloaded or the model slow; "
        "pass a larger timeout if this model needs longer",
    ),
    (httpx.WriteTimeout, "timed out sending the request to {url} after {write} s"),
    (
        httpx.PoolTimeout,
        "no free connection to {url} after {pool} s: too many requests share this HTTP "
        "client at once",
    ),
    (
        httpx.ProxyError,
        "the proxy failed to reach {url} ({why}): check HTTPS_PROXY, HTTP_PROXY and NO_PROXY",
    ),
    (httpx.ConnectError, "could not connect to {url} ({why}): {check_server}"),
    ((httpx.RemoteProtocolError, httpx.NetworkError), "the connection to {url} broke ({why})"),
)
"""The failures on the way to or from the server that another try may fix, the first that
matches first: what went wrong, with the phase's time limit ({connect}, {read}…) a timeout
hit."""


def _connection_failure(endpoint: Endpoint, exc: httpx.RequestError, why: str) -> str | None:
    """What went wrong on the way to or from the server, for the failures another try may
    fix; None for any other."""
    base = endpoint.base_url
    check_server = f"check that the server is running and that the base URL '{base}' is right"
    for kind, failure in _CONNECTION_FAILURES:
        if isinstance(exc, kind):
            limits = endpoint.timeout.as_dict()
            return failure.format(url=endpoint.url, why=why, check_server=check_server, **limits)
    return None


def stream_ended_early(endpoint: Endpoint) -> ProviderConnectionError:
    """The error for a stream that closed cleanly before the model finished its turn."""
    return ProviderConnectionError(
        f"the stream from {endpoint.url} ended before the model finished its answer",
        retryable=True,
    )


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= _MAX_QUOTED_CHARS:
        return flat
    return flat[: _MAX_QUOTED_CHARS - 1] + "…"


_PAGE_START = re.compile(rb"\s*(<!doctype html|<html)", re.IGNORECASE)
_PAGE_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _describe_page(raw: bytes) -> str | None:
    """An HTML page said in a few words (its title), not quoted: a web server's or a proxy's
    error page is markup a person would have to read through; None for anything else."""
    if not _PAGE_START.match(raw[:512]):
        return None
    title = _PAGE_TITLE.search(raw)
    if title is None:
        return "an HTML page"
    named = _shorten(html.unescape(title.group(1).decode("utf-8", errors="replace")))
    return f"an HTML page titled {named!r}" if named else "an HTML page"


def _quote(raw: bytes) -> str:
    text = _shorten(raw.decode("utf-8", errors="replace"))
    return repr(text) if text else "an empty body"
