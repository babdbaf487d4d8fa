"""Reading the server names of a real TLS ClientHello, and refusing the shapes an attacker
sends (sandboxd.egress.tls_hello)."""

from __future__ import annotations

import pytest

from sandboxd.egress.tls_hello import UnreadableHello, server_names
from tests.support.tls_hellos import (
    SERVER_NAME,
    client_hello,
    edited,
    server_name_data,
    split_in_two_records,
    with_names,
    with_second_name_extension,
)


def test_the_server_name_of_a_real_client_hello() -> None:
    assert server_names(client_hello("web.test")) == ("web.test",)
    assert server_names(client_hello(None)) == ()


def test_every_name_of_a_list_is_read() -> None:
    assert server_names(with_names(b"web.test", b"evil.test")) == ("web.test", "evil.test")


def test_case_and_a_trailing_dot_are_the_same_name() -> None:
    assert server_names(with_names(b"WEB.Test.")) == ("web.test",)


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (with_second_name_extension(b"evil.test"), "it carries two server_name extensions"),
        (
            edited(client_hello("web.test"), lambda found: [*found, found[-1]]),
            "it carries two extensions",
        ),
        (split_in_two_records(client_hello("web.test"))[0], "split across TLS records"),
        (client_hello("web.test")[:-1], "cut short or longer than 16 KiB"),
        (client_hello("web.test")[:5], "cut short or longer than 16 KiB"),
        (
            client_hello("web.test")[:3] + b"\x00\x04\x01\x00\x00\x00",
            "its ClientHello is cut short",
        ),
        (with_names(b"web.test", kind=1), "something other than a host name (1)"),
        (with_names(), "names no server"),
        (with_names(b" web.test"), "b' web.test' is not a host name"),
        (with_names(b"[web.test]"), "is not a host name"),
        (with_names(b"web.test\x00.evil.test"), "is not a host name"),
        (with_names(b"w\xc3\xa9b.test"), "is not a host name"),
        (with_names(b""), "is not a host name"),
        (with_names(b"web..test"), "is not a host name"),
        (
            edited(client_hello("web.test"), lambda found: [(SERVER_NAME, b"\x00\x10\x00")]),
            "its server_name extension is cut short",
        ),
        (
            edited(
                client_hello("web.test"),
                lambda found: [(SERVER_NAME, server_name_data(b"web.test") + b"\x00")],
            ),
            "bytes follow the server name list",
        ),
        (b"\x16\x03\x01\x00\x02\x01\x00", "its handshake message is cut short"),
        (b"\x16\x03\x01\x00\x01\x02", "not a ClientHello"),
    ],
)
def test_a_hello_read_two_ways_is_unreadable(record: bytes, says: str) -> None:
    with pytest.raises(UnreadableHello, match=says.replace("(", r"\(").replace(")", r"\)")):
        server_names(record)


def test_bytes_after_the_hello_in_its_record_are_refused() -> None:
    hello = client_hello("web.test")
    size = int.from_bytes(hello[3:5], "big") + 1
    extra = hello[:3] + size.to_bytes(2, "big") + hello[5:] + b"\x00"
    with pytest.raises(UnreadableHello, match="bytes follow the ClientHello in its record"):
        server_names(extra)
