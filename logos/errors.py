"""The errors logos raises on purpose, so callers can catch them by kind rather than by text.

Every message says what went wrong and what to do about it; `retryable` tells a caller
whether sending the same request again may succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class LogosError(Exception):
    """Base of every error logos raises on purpose."""


class MessageError(LogosError):
    """An error whose message alone is what a user reads: what is wrong and what to do. It is
    kept as `message`, for callers that show it (with a prefix of their own, or none)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProviderError(LogosError):
    """A model provider failed to answer a request.

    `status` is the HTTP status when the server answered one; `retry_after_s` is how long
    the server asked us to wait (from `Retry-After` / `retry-after-ms`) when it said so.
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        retryable: bool = False,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class AuthenticationError(ProviderError):
    """HTTP 401: the API key is missing, wrong or revoked."""


class PermissionDeniedError(ProviderError):
    """HTTP 403: the key is valid but may not use this model or endpoint."""


class NotFoundError(ProviderError):
    """HTTP 404: an unknown model or a wrong base URL."""


class BadRequestError(ProviderError):
    """HTTP 400/413/422, or a request logos refuses to send: the request itself is wrong."""


class ContextWindowExceededError(BadRequestError):
    """The request is longer than the model's context window (a 400 or 413 that says so)."""


class RateLimitError(ProviderError):
    """HTTP 429: too many requests or tokens for now (or no quota left, then not retryable)."""


class ServerError(ProviderError):
    """HTTP 5xx or an overloaded/internal error reported inside the stream."""


class ProviderConnectionError(ProviderError):
    """The server could not be reached, or the connection broke or timed out."""


class StreamInterruptedError(ProviderError):
    """The stream failed after some output was already delivered.

    The provider does not retry this itself: the caller has shown the partial output and
    decides whether to send the request again.
    """


class RetriesExhaustedError(ProviderError):
    """Every attempt allowed by the retry policy failed; `last_error` is the final cause."""

    def __init__(self, message: str, *, attempts: int, last_error: ProviderError) -> None:
        super().__init__(message, status=last_error.status, retryable=False)
        self.attempts = attempts
        self.last_error = last_error


class LocalModelError(LogosError):
    """The local model server (llama.cpp in this process) could not start."""


class SettingsError(MessageError, ValueError):
    """The settings cannot work as given (a flag, the config file, the environment, a server
    that cannot say which model it serves); the message names the setting and what to do."""


class RecordFileError(MessageError):
    """A run's record (a trajectory, the audit log) cannot be read or written; the message
    says why and what to do."""


KnownNames = Callable[[tuple[int | str, ...]], Iterable[str]]
"""The names allowed where an unknown one was found (its location), to list in the message."""


def describe_problem(
    error: ErrorDetails, noun: str = "field", known: KnownNames | None = None
) -> str:
    """One problem of a pydantic validation as a person reads it: the field (or key) it
    names, and an unknown name's known neighbours, so the fix is in the message."""
    where = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        names = ", ".join(known(error["loc"])) if known else ""
        return f"unknown {noun} {where!r}" + (f" (known {noun}s: {names})" if names else "")
    if error["type"] == "missing":
        return f"missing {noun} {where!r}"
    return f"{noun} {where!r}: {str(error['msg']).removeprefix('Value error, ')}"


def describe_invalid(
    exc: ValidationError, noun: str = "field", known: KnownNames | None = None
) -> str:
    """Every problem of a pydantic validation (`describe_problem`), each named once."""
    return "; ".join(dict.fromkeys(describe_problem(e, noun, known) for e in exc.errors()))


_Cause = TypeVar("_Cause", bound=BaseException)


def cause_of(exc: BaseException, kind: type[_Cause]) -> _Cause | None:
    """The first exception of `kind` in `exc`'s chain of causes, `exc` included: what a
    library's error wraps (httpx's wraps httpcore's, which wraps the socket's or ssl's)."""
    cause: BaseException | None = exc
    for _ in range(8):  # a chain is a few links; a cycle must not loop forever
        if cause is None or isinstance(cause, kind):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None
