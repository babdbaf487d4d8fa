"""The allowlist's grammar and what an entry matches (sandboxd.egress.host_rules)."""

from __future__ import annotations

import ipaddress

import pytest

from sandboxd.egress.host_rules import Allowlist, HostRuleError, is_special, parse_rule


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ("PyPI.org.", "pypi.org"),
        ("*.Example.org:8443", "*.example.org:8443"),
        ("api.example.org:*", "api.example.org:*"),
        ("10.0.0.5", "10.0.0.5"),
        ("[FD00::5]:8080", "[fd00::5]:8080"),
        ("fd00::/64", "[fd00::/64]"),
        ("10.1.2.3/8", "10.0.0.0/8"),
        ("::ffff:127.0.0.1", "127.0.0.1"),
    ],
)
def test_entries_are_normalised(entry: str, text: str) -> None:
    assert parse_rule(entry).text == text


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("", "empty"),
        ("*.org", "top-level domain"),
        ("*", "not a host name"),
        ("exa mple.org", "not a host name"),
        ("a..b", "not a host name"),
        ("example.org:0", "port '0'"),
        ("example.org:70000", "port '70000'"),
        ("example.org:http", "port 'http'"),
        ("[fd00::1", "unclosed"),
        ("0.0.0.0/0", "every address"),
        ("10.0.0.0/33", "not a valid address"),
        ("x" * 400, "too long"),
        ("evil.org\x00.good.org", "too long"),
        ("*.10.0.0.1", "cannot cover an address"),
    ],
)
def test_bad_entries_say_what_is_wrong(entry: str, says: str) -> None:
    with pytest.raises(HostRuleError, match=says.replace("*", r"\*").replace("[", r"\[")):
        parse_rule(entry)


def test_names_wildcards_and_ports_match_as_written() -> None:
    allowlist = Allowlist.parse(["pypi.org", "*.example.org:8443", "api.test:*"])
    assert allowlist.allows("pypi.org", 443) and allowlist.allows("pypi.org", 80)
    assert not allowlist.allows("pypi.org", 22)
    assert not allowlist.allows("evil-pypi.org", 443) and not allowlist.allows("pypi.org.evil", 443)
    assert allowlist.allows("a.b.example.org", 8443) and not allowlist.allows("example.org", 8443)
    assert not allowlist.allows("badexample.org", 8443)
    assert allowlist.allows("api.test", 6379)
    assert not allowlist.allows("10.0.0.1", 443)


def test_address_entries_cover_literals_and_name_their_addresses() -> None:
    allowlist = Allowlist.parse(["10.0.0.0/8", "[fd00::5]:8080"])
    assert allowlist.allows("10.9.8.7", 443) and not allowlist.allows("11.0.0.1", 443)
    assert allowlist.allows("fd00::5", 8080) and not allowlist.allows("fd00::5", 443)
    assert allowlist.allows("::ffff:10.0.0.1", 80)  # an IPv4-mapped literal is its IPv4 address
    assert allowlist.names_address(ipaddress.ip_address("10.1.1.1"), 443)
    assert not allowlist.names_address(ipaddress.ip_address("127.0.0.1"), 443)
    assert not allowlist.allows("internal.corp", 443)  # addresses never match a name


@pytest.mark.parametrize(
    ("entries", "port"),
    [
        (["example.test:*", "10.0.0.5"], 22),
        (["example.test:*", "10.0.0.0/8:443"], 8080),
        (["example.test:443", "10.0.0.0/8:22"], 443),
        (["example.test", "[fd00::5]:8080"], 443),
    ],
)
def test_an_address_entry_names_its_addresses_only_on_its_ports(
    entries: list[str], port: int
) -> None:
    """A name the allowlist allows on `port` resolves into an address entry for other ports:
    that entry does not open `port` of its addresses."""
    allowlist = Allowlist.parse(entries)
    address = ipaddress.ip_address(
        "fd00::5" if any("fd00" in entry for entry in entries) else "10.0.0.5"
    )
    assert allowlist.allows("example.test", port)
    assert not allowlist.names_address(address, port)
    assert allowlist.address_rules(address) == (allowlist.rules[1],)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "169.254.169.254",
        "10.0.0.1",
        "192.168.1.1",
        "224.0.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fd00::1",
        "ff02::1",
        "::",
        "100.64.0.1",
        "240.0.0.1",
    ],
)
def test_special_addresses(address: str) -> None:
    assert is_special(ipaddress.ip_address(address))


def test_public_addresses_are_not_special() -> None:
    assert not is_special(ipaddress.ip_address("151.101.0.223"))
    assert not is_special(ipaddress.ip_address("2a04:4e42::223"))
