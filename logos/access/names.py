"""The names a request may call a local server by: what counts as loopback, which `Host` a
server answers to, and which `Origin` may call it.

WHY `Host`: a web page whose own name its attacker makes resolve to 127.0.0.1 (DNS rebinding)
reaches a loopback server with the browser's help, but names itself in `Host`; a server that
answers only to its own names keeps it out even before the token is checked. The port is not
part of the check: an SSH tunnel forwards from a port of its own, and a rebinding page is
known by its name. WHY `Origin`: a page on another origin can make the browser send requests
(a form, a fetch whose answer it cannot read); it cannot send the token, but a second lock
costs nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback: `localhost`, or an address in 127.0.0.0/8
    or ::1 (in brackets or not). Any other name is not, whatever it resolves to today."""
    name = host.strip().lower()
    if name == "localhost":
        return True
    address = _address(name)
    return address is not None and address.is_loopback


@dataclass(frozen=True)
class AllowedHosts:
    """The names a request's `Host` may give."""

    names: frozenset[str]
    any_address: bool = False
    """Listening on every address (0.0.0.0, ::): any IP address may name this machine too,
    and a rebinding page cannot name itself by an address."""

    def allows(self, header: str) -> bool:
        name = _host_name(header)
        return name in self.names or (self.any_address and _address(name) is not None)

    def refusal(self, header: str) -> str:
        """Why a request with this `Host` is refused, and how to reach the server instead."""
        names = ", ".join(sorted(self.names))
        also = ", or an IP address of this machine" if self.any_address else ""
        wrong = (
            f"this server does not answer to the name {header[:100]!r} (its Host header)"
            if header
            else "this request has no Host header"
        )
        return (
            f"{wrong}: reach it by one of its own names ({names}{also}); a page under another "
            "name may not call it (DNS rebinding)"
        )


def allowed_hosts(listening: str) -> AllowedHosts:
    """What a server listening on `listening` (an address or a name) answers to: loopback's
    names and that one, or any address when it is unspecified."""
    name = listening.strip().strip("[]").lower()
    if name in ("", "0.0.0.0", "::"):
        return AllowedHosts(_LOOPBACK_NAMES, any_address=True)
    return AllowedHosts(_LOOPBACK_NAMES | {name})


def _host_name(header: str) -> str:
    """The name in a `Host` header, without its port (`[::1]:80` → `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def origin_allowed(origin: str, host: str, allowed: Iterable[str]) -> bool:
    """Whether a request's `Origin` is the server's own (`http://` + the `Host` it was sent
    to) or one the launch allows."""
    given = _origin(origin)
    return given == _origin(f"http://{host}") or given in {_origin(o) for o in allowed}


def origin_refusal(origin: str, allow_flag: str | None) -> str:
    """Why a request from `origin` is refused; `allow_flag`: the option that would allow it."""
    allowing = f", or start the server with {allow_flag} {origin[:100]}" if allow_flag else ""
    return (
        f"a page from another origin ({origin[:100]!r}) may not call this server: call it from "
        f"its own origin, or without an Origin header as scripts do{allowing}"
    )


def _origin(value: str) -> str:
    return value.strip().lower().removesuffix("/")


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
