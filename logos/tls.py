"""The TLS context every HTTP client of logos verifies its server with: built once per
process, and only for a URL that can use it.

WHY: httpx builds a context from certifi's CA bundle for each client it makes, 0.02 CPU-s
each; a task run made two before its first token, and a plain-HTTP endpoint (a local model
server, a loopback `logos serve`, temenos on TCP) needs none at all.
"""

from __future__ import annotations

import ssl
from functools import cache

import httpx

from logos.errors import cause_of

__all__ = ["tls_for", "tls_problem"]


def tls_for(url: str | httpx.URL) -> ssl.SSLContext:
    """The context for a client of `url`. For https, the one httpx itself would build
    (certifi's bundle, or `SSL_CERT_FILE` and `SSL_CERT_DIR` as the process started with
    them, whatever the client's `trust_env`, which keeps proxies away), shared by every client
    of the process. For any other scheme, one that trusts no certificate at all: such a
    client never shakes hands over TLS, and if it ever tried, it fails closed."""
    if httpx.URL(url).scheme == "https":
        return _verifying()
    return _trusting_nothing()


def tls_problem(url: str | httpx.URL, exc: BaseException) -> str | None:
    """What to tell a user whose request to `url` (the base URL they gave) failed in the TLS
    handshake for a reason another try cannot fix: the server's certificate is not trusted,
    or the server answers in plain HTTP; None for any other failure (`exc`, an httpx error).

    WHY: "is the server running?" and five retries send them the wrong way; both are
    mistakes of a setting (a private CA not named, https:// written for a local server)."""
    error = cause_of(exc, ssl.SSLError)
    given = httpx.URL(url)
    if isinstance(error, ssl.SSLCertVerificationError):
        why = error.verify_message or str(error)
        return (
            f"the TLS certificate of {given.host} is not trusted ({why}): if it comes from a "
            "private CA (a company proxy, a local HTTPS server), set SSL_CERT_FILE to that "
            "CA's certificate (PEM); else check the base URL"
        )
    if error is not None and error.reason in _PLAIN_HTTP_ANSWERS:
        port = given.port or 443  # WHY: the port it answered on, never http's default
        plain = given.copy_with(scheme="http", port=port)
        return (
            f"{given.host}:{port} answered in plain HTTP, not TLS: write its address with "
            f"http:// ({plain})"
        )
    return None


_PLAIN_HTTP_ANSWERS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE"})
"""OpenSSL's reasons (3.0's, then 3.2's) when the answer to a ClientHello starts
`HTTP/1.1`."""


@cache
def _verifying() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=True)


@cache
def _trusting_nothing() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, with no CA to verify by
