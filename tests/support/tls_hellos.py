"""Real TLS ClientHellos from Python's TLS, and the edits an attacker makes to them: the
shapes the egress proxy must refuse (two server names, two server_name extensions, a hello
split across records, a name of odd bytes)."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable

Extensions = list[tuple[int, bytes]]
SERVER_NAME = 0


def client_hello(name: str | None) -> bytes:
    """A real ClientHello naming `name` (or no server), made in memory: one TLS record."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _context(check_hostname=name is not None).wrap_bio(
        incoming, outgoing, server_hostname=name
    )
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        return outgoing.read()
    raise AssertionError("a handshake with no server completed")


def server_name_data(*names: bytes, kind: int = 0) -> bytes:
    """A server_name extension's data listing `names`, each of name type `kind`."""
    entries = b"".join(bytes((kind,)) + len(name).to_bytes(2, "big") + name for name in names)
    return len(entries).to_bytes(2, "big") + entries


def with_names(*names: bytes, kind: int = 0) -> bytes:
    """A real ClientHello whose server_name extension lists `names` instead."""
    data = server_name_data(*names, kind=kind)
    return edited(client_hello("web.test"), lambda found: _replaced(found, data))


def with_second_name_extension(name: bytes) -> bytes:
    """A real ClientHello naming web.test, with a second server_name extension naming
    `name` after its others."""
    extra = (SERVER_NAME, server_name_data(name))
    return edited(client_hello("web.test"), lambda found: [*found, extra])


def edited(record: bytes, edit: Callable[[Extensions], Extensions]) -> bytes:
    """`record` (a ClientHello alone in one record) with its extensions as `edit` returns
    them, every length fixed."""
    body = record[9:]
    at = 2 + 32
    at += 1 + body[at]
    at += 2 + int.from_bytes(body[at : at + 2], "big")
    at += 1 + body[at]
    start, end = at + 2, at + 2 + int.from_bytes(body[at : at + 2], "big")
    found: Extensions = []
    at = start
    while at < end:
        kind = int.from_bytes(body[at : at + 2], "big")
        size = int.from_bytes(body[at + 2 : at + 4], "big")
        found.append((kind, body[at + 4 : at + 4 + size]))
        at += 4 + size
    blob = b"".join(
        kind.to_bytes(2, "big") + len(data).to_bytes(2, "big") + data for kind, data in edit(found)
    )
    hello = body[: start - 2] + len(blob).to_bytes(2, "big") + blob
    handshake = b"\x01" + len(hello).to_bytes(3, "big") + hello
    return record[:3] + len(handshake).to_bytes(2, "big") + handshake


def split_in_two_records(record: bytes) -> tuple[bytes, bytes]:
    """`record`'s ClientHello in two records, as TLS allows and the proxy refuses."""
    handshake = record[5:]
    half = len(handshake) // 2
    first, second = (
        record[:3] + len(part).to_bytes(2, "big") + part
        for part in (handshake[:half], handshake[half:])
    )
    return first, second


def _replaced(found: Extensions, data: bytes) -> Extensions:
    return [(kind, data if kind == SERVER_NAME else old) for kind, old in found]


@functools.cache
def _context(*, check_hostname: bool) -> ssl.SSLContext:
    """One context for every hello: each new one reads the CA certificates again, 20 ms of
    CPU, and the test modules make their hellos as they are collected."""
    context = ssl.create_default_context()
    context.check_hostname = check_hostname
    return context
