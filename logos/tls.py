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

__all__ = ["tls_for", "untrusted_certificate"]


def tls_for(url: str | httpx.URL) -> ssl.SSLContext:
    """The context for a client of `url`. For https, the one httpx itself would build
    (certifi's bundle, or `SSL_CERT_FILE` and `SSL_CERT_DIR` as the process started with
    them, whatever the client's `trust_env`, which keeps proxies away), shared by every client
    of the process. For any other scheme, one that trusts no certificate at all: such a
    client never shakes hands over TLS, and if it ever tried, it fails closed."""
    if httpx.URL(url).scheme == "https":
        return _verifying()
    return _trusting_nothing()


def untrusted_certificate(url: str | httpx.URL, exc: BaseException) -> str | None:
    """What to tell a user whose request to `url` failed because the server's certificate
    was not trusted (`exc`, an httpx error, comes from that); None for any other failure.

    WHY: another try cannot fix it, and "is the server running?" sends them the wrong way."""
    cause: BaseException | None = exc
    for _ in range(8):  # httpx's error, httpcore's, then the ssl module's
        if cause is None:
            return None
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = cause.verify_message or str(cause)
            return (
                f"the TLS certificate of {httpx.URL(url).host} is not trusted ({why}): if it "
                "comes from a private CA (a company proxy, a local HTTPS server), set "
                "SSL_CERT_FILE to that CA's certificate (PEM); else check the base URL"
            )
        cause = cause.__cause__ or cause.__context__
    return None


@cache
def _verifying() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=True)


@cache
def _trusting_nothing() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, with no CA to verify by
