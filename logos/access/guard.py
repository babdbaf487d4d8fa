"""The check every request to a local server passes before anything else sees it: its `Host`
names the server (421), its `Origin`, if any, may call it (403), and it carries the bearer
token (401), compared in constant time. Each refusal is JSON, `{"error": "..."}`, saying
what was wrong and what to do.

Anything on the machine can reach a loopback port, and a web page can make the browser send
to one (see `logos.access.names`): so no request is let through on where it comes from.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from logos.access.names import AllowedHosts, origin_allowed, origin_refusal

if TYPE_CHECKING:  # WHY: only the types; the servers that use the guard bring Starlette
    from starlette.types import ASGIApp, Receive, Scope, Send

_CHECKED_HEADERS = (b"host", b"origin", b"authorization")
"""Given twice, one of these would be checked in one copy and read in the other."""


@dataclass(frozen=True)
class Access:
    """What a request must show to reach a server."""

    token: str = field(repr=False)
    token_hint: str
    """Where a client finds the token, for the 401's message."""
    hosts: AllowedHosts | None
    """The names `Host` may give; None on a Unix socket, which no browser reaches."""
    origins: frozenset[str] = frozenset()
    """Origins allowed beside the server's own."""
    allow_origin_flag: str | None = None
    """The option that allows an origin, for the 403's message; None: there is none."""
    open_paths: frozenset[str] = frozenset()
    """Paths a GET reaches without the token: a page that holds no data."""


def _bearer_matches(header: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>` (the scheme in any case), compared in constant time."""
    if header is None:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("latin-1"), token.encode("ascii"))


class AccessGuard:
    """Answer a request that fails `access` with its refusal; pass the rest to `app`."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self._app = app
        self._access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self._refusal(scope)
            if refused is not None:
                await _refuse(send, *refused)
                return
        await self._app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        access = self._access
        headers: dict[bytes, str] = {}
        for name, value in scope["headers"]:
            if name in _CHECKED_HEADERS:
                if name in headers:
                    return 400, f"more than one {name.decode()} header: send one"
                headers[name] = value.decode("latin-1")
        host = headers.get(b"host", "")
        if access.hosts is not None and not access.hosts.allows(host):
            return 421, access.hosts.refusal(host)
        origin = headers.get(b"origin")
        if origin is not None and not origin_allowed(origin, host, access.origins):
            return 403, origin_refusal(origin, access.allow_origin_flag)
        if scope.get("method") == "GET" and scope.get("path") in access.open_paths:
            return None
        given = headers.get(b"authorization")
        if _bearer_matches(given, access.token):
            return None
        if given is None:
            problem = "no bearer token"
        elif given.partition(" ")[0].lower() != "bearer":
            problem = "an Authorization header that is not a bearer token"
        else:
            problem = "a wrong bearer token"
        return 401, (
            f"this request has {problem}: send Authorization: Bearer <token>, with "
            f"{access.token_hint}"
        )


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
