"""The network allowlist: which hosts a sandbox's egress proxy may connect to.

An entry is one of:

- a host name, `pypi.org`: that name exactly;
- a wildcard, `*.example.org`: any name below example.org (not example.org itself);
- an address, `10.0.0.5` or `[fd00::5]`, or a network, `10.0.0.0/8`: targets written as
  such an address, and names that resolve into it.

each optionally followed by `:PORT` or `:*` (any port). Without a port an entry allows 80
and 443 only: a registry or an API, not every service a host runs. Every entry's port is
enforced: a connection needs one entry that covers both its target and its port, and a name
that resolves to a special address also needs an address entry that covers that address
with that port.

WHY addresses are separate from names: a name that resolves to a loopback, link-local,
private, multicast or unspecified address, or to one of the host's own, is refused unless an
address entry names that address; so an allowed name whose DNS answer points inside (at the
metadata service, at the daemon's host) reaches nothing, while an intranet stays reachable for
whoever names it on purpose.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_DEFAULT_PORTS = (80, 443)
"""The ports of an entry written without one."""
MAX_ENTRY_CHARS = 300
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_HINT = (
    "write a host name (pypi.org), a wildcard (*.example.org), an address (10.0.0.5, "
    "[fd00::5]) or a network (10.0.0.0/8), optionally followed by :PORT or :*"
)


class HostRuleError(ValueError):
    """An entry that is not one; the message says what is wrong and how to write it."""


@dataclass(frozen=True)
class HostRule:
    """One parsed entry."""

    text: str
    """As normalised: what audit lines and messages show."""
    name: str | None
    """An exact name, or for a wildcard the suffix after `*.`; None for an address entry."""
    wildcard: bool
    network: IPNetwork | None
    ports: tuple[int, ...] | None
    """None: any port."""

    def allows_port(self, port: int) -> bool:
        return self.ports is None or port in self.ports

    def matches(self, host: str, port: int) -> bool:
        """Whether a target written as `host` (a normalised name or address) and `port` is
        this entry's."""
        if not self.allows_port(port):
            return False
        address = parse_address(host)
        if self.network is not None:
            return address is not None and address in self.network
        if address is not None or self.name is None:
            return False
        if self.wildcard:
            return host.endswith("." + self.name)
        return host == self.name


@dataclass(frozen=True)
class Allowlist:
    """A sandbox's entries: the key of its proxy's decisions."""

    rules: tuple[HostRule, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        """Raises HostRuleError naming the first bad entry."""
        rules: list[HostRule] = []
        for entry in entries:
            rule = parse_rule(entry)
            if rule not in rules:
                rules.append(rule)
        return cls(tuple(rules))

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(rule.text for rule in self.rules)

    def allows(self, host: str, port: int) -> bool:
        """Whether the target as written (before any resolution) is allowed."""
        return any(rule.matches(host, port) for rule in self.rules)

    def address_rules(self, address: IPAddress) -> tuple[HostRule, ...]:
        """The address entries whose network holds `address`, whatever their ports."""
        return tuple(
            rule for rule in self.rules if rule.network is not None and address in rule.network
        )

    def names_address(self, address: IPAddress, port: int) -> bool:
        """Whether an address entry covers `address` with `port`. WHY the port too: an
        entry `10.0.0.5:443` opens that address's HTTPS, not its every service to whichever
        allowed name resolves there."""
        return any(rule.allows_port(port) for rule in self.address_rules(address))


def normalise_host(host: str) -> str:
    """Lower case without a trailing dot; an IPv6 address without brackets."""
    host = host.strip().lower().removesuffix(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def parse_address(host: str) -> IPAddress | None:
    """The address `host` is written as, or None for a name. IPv4-mapped IPv6 addresses are
    their IPv4 address (so ::ffff:127.0.0.1 is loopback)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_valid_name(host: str) -> bool:
    """A DNS name of letters, digits and hyphens (write an internationalised name in its
    xn-- form)."""
    if not host or len(host) > 253:
        return False
    return all(_LABEL.fullmatch(label) for label in host.split("."))


def is_special(address: IPAddress) -> bool:
    """Not a public unicast address: refused unless an address entry names it."""
    return (
        address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
        or not address.is_global
    )


def parse_rule(entry: str) -> HostRule:
    if not isinstance(entry, str) or not entry.strip():
        raise HostRuleError(f"an empty host entry: {_HINT}")
    if len(entry) > MAX_ENTRY_CHARS or "\x00" in entry:
        raise HostRuleError(f"host entry {entry[:64]!r}... is too long: {_HINT}")
    host, ports = _split_port(entry.strip())
    host = normalise_host(host)
    network = _parse_network(host)
    if network is not None:
        return HostRule(_text(str(network), network, ports), None, False, network, ports)
    wildcard = host.startswith("*.")
    name = host.removeprefix("*.") if wildcard else host
    if not is_valid_name(name):
        raise HostRuleError(f"host entry {entry!r} is not a host name, address or network: {_HINT}")
    if wildcard and name.count(".") < 1:
        raise HostRuleError(
            f"host entry {entry!r} would allow a whole top-level domain: name at least two "
            "labels after *. (e.g. *.example.org)"
        )
    if parse_address(name) is not None:
        raise HostRuleError(f"host entry {entry!r}: a wildcard cannot cover an address: {_HINT}")
    shown = ("*." if wildcard else "") + name
    return HostRule(_text(shown, None, ports), name, wildcard, None, ports)


def _split_port(entry: str) -> tuple[str, tuple[int, ...] | None]:
    if entry.startswith("["):
        host, bracket, rest = entry.partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise HostRuleError(f"host entry {entry!r} has an unclosed [address]: {_HINT}")
        return host + "]", _parse_port(entry, rest[1:]) if rest else _DEFAULT_PORTS
    if entry.count(":") > 1:  # a bare IPv6 address or network: no port
        return entry, _DEFAULT_PORTS
    host, colon, port = entry.partition(":")
    return host, _parse_port(entry, port) if colon else _DEFAULT_PORTS


def _parse_port(entry: str, port: str) -> tuple[int, ...] | None:
    if port == "*":
        return None
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise HostRuleError(
            f"host entry {entry!r} has port {port!r}: write a port from 1 to 65535, or * for any"
        )
    return (int(port),)


def _parse_network(host: str) -> IPNetwork | None:
    if "/" not in host and parse_address(host) is None:
        return None
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        raise HostRuleError(
            f"host entry {host!r} is not a valid address or network: {_HINT}"
        ) from None
    if network.prefixlen == 0:
        raise HostRuleError(
            f"host entry {host!r} names every address: that is network=true, not an allowlist"
        )
    mapped = parse_address(str(network.network_address))
    if network.num_addresses == 1 and mapped is not None:
        return ipaddress.ip_network(mapped)
    return network


def _text(host: str, network: IPNetwork | None, ports: tuple[int, ...] | None) -> str:
    if network is not None and network.num_addresses == 1:
        host = str(network.network_address)
    if ":" in host:
        host = f"[{host}]"
    if ports == _DEFAULT_PORTS:
        return host
    return f"{host}:{'*' if ports is None else ports[0]}"
