"""Which hosts a request's allowlist may name: entries of the egress allowlist's grammar
(sandboxd.egress.host_rules), only for a sandbox without network, and only public addresses
unless the config's allow_private_hosts lets it name the host's own networks."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from sandboxd.egress.host_rules import Allowlist, HostRuleError, IPNetwork
from sandboxd.policy.errors import PolicyError


def check_hosts(
    entries: Sequence[str], *, network: bool, allow_private_hosts: bool
) -> tuple[str, ...]:
    """The allowlist's entries, normalised; refuses a malformed one (422), one with
    network on, and one naming a non-public address unless the config allows it."""
    if not entries:
        return ()
    if network:
        raise PolicyError(
            "hosts_with_network",
            "allowed_hosts limits a sandbox without network to those hosts, and this "
            "request also asks for network=true (every host): send one or the other",
            status=422,
        )
    try:
        allowlist = Allowlist.parse(entries)
    except HostRuleError as bad:
        raise PolicyError("invalid_host", str(bad), status=422) from None
    if not allow_private_hosts:
        for rule in allowlist.rules:
            if rule.network is not None and not _all_public(rule.network):
                raise PolicyError(
                    "private_host_refused",
                    f"allowed_hosts entry {rule.text} names non-public addresses (loopback, "
                    "private, link-local...): set allow_private_hosts = true in the "
                    "daemon's config to let requests name them",
                )
    return allowlist.entries


def _all_public(network: IPNetwork) -> bool:
    """Whether no address of `network` is special (a wide network of public ends may still
    hold private ones)."""
    return not any(
        network.overlaps(special)
        for special in _SPECIAL_NETWORKS
        if special.version == network.version
    )


_SPECIAL_NETWORKS = tuple(
    ipaddress.ip_network(text)
    for text in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/3",
        "::/8",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
        "::ffff:0:0/96",
        "64:ff9b::/96",
    )
)
