"""Where the temenos runner looks for its daemon: temenos's own client's rules, each one."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos.temenos.address import (
    LISTEN_ADDR_ENV,
    SOCKET_PATH_ENV,
    AddressError,
    TemenosAddress,
    parse_address,
    resolve_address,
)

BOTH = {LISTEN_ADDR_ENV: "127.0.0.1:8081", SOCKET_PATH_ENV: "/run/t/daemon.sock"}


def test_an_explicit_address_wins_over_the_environment() -> None:
    assert resolve_address("/srv/temenos.sock", BOTH) == TemenosAddress(
        socket_path="/srv/temenos.sock"
    )


def test_then_the_listen_address_then_the_socket_path() -> None:
    assert resolve_address(None, BOTH) == TemenosAddress(base_url="http://127.0.0.1:8081")
    only_socket = {SOCKET_PATH_ENV: "/run/t/daemon.sock"}
    assert resolve_address(None, only_socket) == TemenosAddress(socket_path="/run/t/daemon.sock")
    # An empty variable is no address, as for temenos's client.
    assert resolve_address(None, {LISTEN_ADDR_ENV: "", **only_socket}).socket_path is not None


def test_else_the_default_socket_in_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_address(None, {}) == TemenosAddress(
        socket_path=str(tmp_path / ".temenos" / "daemon.sock")
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/abs/daemon.sock", TemenosAddress(socket_path="/abs/daemon.sock")),
        ("./rel/daemon.sock", TemenosAddress(socket_path="./rel/daemon.sock")),
        ("../up.sock", TemenosAddress(socket_path="../up.sock")),
        ("http://10.0.0.5:8081", TemenosAddress(base_url="http://10.0.0.5:8081")),
        ("http://temenos.ns.svc:8081/", TemenosAddress(base_url="http://temenos.ns.svc:8081")),
        ("http://temenos", TemenosAddress(base_url="http://temenos")),
        ("temenos.ns.svc:8081", TemenosAddress(base_url="http://temenos.ns.svc:8081")),
        (":8081", TemenosAddress(base_url="http://localhost:8081")),
        ("[::1]:80", TemenosAddress(base_url="http://[::1]:80")),
    ],
)
def test_paths_are_sockets_and_the_rest_is_tcp(given: str, expected: TemenosAddress) -> None:
    assert parse_address(given) == expected


def test_https_is_refused_with_what_to_use_instead() -> None:
    with pytest.raises(AddressError) as caught:
        parse_address("https://temenos.example:8443")
    message = str(caught.value)
    assert "plain HTTP" in message and "http://host:port" in message
    with pytest.raises(AddressError, match="plain HTTP"):
        resolve_address(None, {LISTEN_ADDR_ENV: "HTTPS://temenos:1"})


@pytest.mark.parametrize(
    "given", ["daemon.sock", "ftp://h:1", "h:99999", "h:port", "user@h:1", "a b:1", "http://"]
)
def test_what_is_no_address_is_refused_naming_the_forms(given: str) -> None:
    with pytest.raises(AddressError, match=r"socket path \(starting with / or \.\)"):
        parse_address(given)
