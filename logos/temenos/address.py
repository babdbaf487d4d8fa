"""Where a temenos daemon listens, found as temenos's own client finds it.

An explicit address, else $TEMENOS_LISTEN_ADDR, else $TEMENOS_SOCKET_PATH, else
~/.temenos/daemon.sock. An address starting with `/` or `.` is a Unix socket; `http://host:port`
or a bare `host:port` is TCP. temenos serves plain HTTP only, so `https://` is refused rather
than sent somewhere that cannot answer it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from logos.tls import tls_for

LISTEN_ADDR_ENV = "TEMENOS_LISTEN_ADDR"
SOCKET_PATH_ENV = "TEMENOS_SOCKET_PATH"
_SOCKET_BASE_URL = "http://temenos"
"""The host part of requests over a Unix socket (the socket is the address)."""


class AddressError(ValueError):
    """The address cannot be a temenos daemon's; the message says why and what to give."""


@dataclass(frozen=True)
class TemenosAddress:
    """A resolved address: a Unix socket path, or the base URL of a TCP listener."""

    socket_path: str | None = None
    base_url: str | None = None

    def __str__(self) -> str:
        return self.socket_path if self.socket_path is not None else str(self.base_url)

    def async_client(self, timeout: httpx.Timeout) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self._client_options(httpx.AsyncHTTPTransport, timeout))

    def client(self, timeout: httpx.Timeout) -> httpx.Client:
        return httpx.Client(**self._client_options(httpx.HTTPTransport, timeout))

    def _client_options(
        self,
        transport: type[httpx.HTTPTransport] | type[httpx.AsyncHTTPTransport],
        timeout: httpx.Timeout,
    ) -> dict[str, Any]:
        """What either client is made with: the socket's transport (if any), the base URL,
        and no proxy from the environment."""
        # WHY verify=False on a socket path: plain HTTP on a Unix socket never shakes hands
        # over TLS, and loading the CA store took 25 ms or more of CPU per client.
        via_socket = (
            None if self.socket_path is None else transport(uds=self.socket_path, verify=False)
        )
        return {
            "transport": via_socket,
            "base_url": self._url,
            "timeout": timeout,
            "trust_env": False,
            "verify": tls_for(self._url),
        }

    @property
    def _url(self) -> str:
        """The clients' base URL: the TCP listener's, or a stand-in host over a socket."""
        return str(self.base_url) if self.socket_path is None else _SOCKET_BASE_URL


def resolve_address(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> TemenosAddress:
    """The address to use: `explicit`, else the environment's, else the default socket."""
    env = os.environ if environ is None else environ
    address = explicit or env.get(LISTEN_ADDR_ENV) or env.get(SOCKET_PATH_ENV)
    if not address:
        return TemenosAddress(socket_path=str(Path.home() / ".temenos" / "daemon.sock"))
    return parse_address(address)


def parse_address(address: str) -> TemenosAddress:
    """One address by temenos's rule (see the module's docstring)."""
    if address.startswith(("/", ".")):
        return TemenosAddress(socket_path=address)
    if address.lower().startswith("https://"):
        raise AddressError(
            f"{address}: temenos serves plain HTTP only, so https:// cannot reach it: use "
            "http://host:port or a bare host:port (or a socket path)"
        )
    lowered = address.lower()
    if "://" in address and not lowered.startswith("http://"):
        raise AddressError(f"{address}: only http:// is spoken: {_FORMS}")
    parts = urlsplit(address if lowered.startswith("http://") else f"http://{address}")
    try:
        port = parts.port
    except ValueError:
        raise AddressError(f"{address} has a port that is not a port number: {_FORMS}") from None
    if port is None and not lowered.startswith("http://"):
        raise AddressError(f"{address} has no port: {_FORMS}")
    if not parts.netloc or not _HOST.fullmatch(parts.netloc) or parts.query or parts.fragment:
        raise AddressError(f"{address} is not an address: {_FORMS}")
    # WHY: Go dials ":8081" on the local machine; a URL needs the host spelled out.
    netloc = parts.netloc if not parts.netloc.startswith(":") else f"localhost{parts.netloc}"
    return TemenosAddress(base_url=f"http://{netloc}{parts.path}".rstrip("/"))


_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*)(:[0-9]+)?")
"""host[:port]: a name, an IPv4 address or a bracketed IPv6 one; no user, no spaces."""
_FORMS = (
    "give a socket path (starting with / or .), http://host:port or host:port, e.g. 127.0.0.1:8081"
)
