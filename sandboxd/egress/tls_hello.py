"""The server names a TLS ClientHello asks for, read strictly, for the egress proxy.

A `CONNECT` tunnel may start only with a ClientHello that names the `CONNECT` host (or no
host). WHY strict: a server reads the hello its own way; a hello the proxy reads one way and a
server another (a list of two names, a second server_name extension, a name with a space or
brackets the proxy would trim, a hello split across records the proxy did not see whole)
could name one host to the proxy and another to the server. So each of those is refused, not
guessed at.
"""

from __future__ import annotations

from sandboxd.egress.host_rules import is_valid_name

HANDSHAKE = 0x16
"""The TLS record type that carries a ClientHello."""
ACCESS_DENIED_ALERT = bytes((0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49))
"""A fatal access_denied alert record: what a refused tunnel's client reads, so its TLS
library says "alert access denied" instead of an unexplained end of stream."""
_CLIENT_HELLO = 0x01
_SERVER_NAME = 0x0000
_HOST_NAME = 0x00


class UnreadableHello(ValueError):
    """A first record the proxy cannot check; the message says what is wrong with it."""


class _Cursor:
    """Reads a TLS structure front to back; any read past its end is UnreadableHello."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._at = 0
        self._what = what

    def take(self, size: int) -> bytes:
        if self._at + size > len(self._data):
            raise UnreadableHello(f"its {self._what} is cut short")
        taken = self._data[self._at : self._at + size]
        self._at += size
        return taken

    def number(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def vector(self, length_size: int) -> bytes:
        """A TLS vector: its length in `length_size` bytes, then that many bytes."""
        return self.take(self.number(length_size))

    @property
    def done(self) -> bool:
        return self._at == len(self._data)


def server_names(record: bytes) -> tuple[str, ...]:
    """The host names the ClientHello in `record` (one whole TLS record, as the client sent
    it) asks for, lower case without a trailing dot; () when it names none.

    Raises UnreadableHello when `record` is not one ClientHello alone in one record, or its
    server_name extension is not exactly one well-formed list of host names."""
    if len(record) < 5 or record[0] != HANDSHAKE:
        raise UnreadableHello("it is not a TLS handshake record")
    fragment = record[5:]
    if len(fragment) != int.from_bytes(record[3:5], "big"):
        raise UnreadableHello(
            "its first record is cut short or longer than 16 KiB: send the ClientHello in one "
            "record"
        )
    handshake = _Cursor(fragment, "handshake message")
    if handshake.number(1) != _CLIENT_HELLO:
        raise UnreadableHello("its first handshake message is not a ClientHello")
    length = handshake.number(3)
    if length > len(fragment) - 4:
        raise UnreadableHello(
            "the ClientHello is split across TLS records: send it in one record (16 KiB)"
        )
    if length < len(fragment) - 4:
        raise UnreadableHello("bytes follow the ClientHello in its record")
    hello = _Cursor(handshake.take(length), "ClientHello")
    hello.take(2 + 32)  # version, random
    hello.vector(1)  # session id
    hello.vector(2)  # cipher suites
    hello.vector(1)  # compression methods
    if hello.done:
        return ()
    extensions = _Cursor(hello.vector(2), "extension list")
    if not hello.done:
        raise UnreadableHello("bytes follow the ClientHello's extensions")
    seen: set[int] = set()
    names: tuple[str, ...] = ()
    while not extensions.done:
        kind = extensions.number(2)
        data = extensions.vector(2)
        if kind in seen:
            what = (
                "server_name extensions" if kind == _SERVER_NAME else f"extensions of type {kind}"
            )
            raise UnreadableHello(f"it carries two {what}")
        seen.add(kind)
        if kind == _SERVER_NAME:
            names = _names(data)
    return names


def _names(data: bytes) -> tuple[str, ...]:
    """The host names of a server_name extension's data (a ServerNameList)."""
    extension = _Cursor(data, "server_name extension")
    entries = _Cursor(extension.vector(2), "server name list")
    if not extension.done:
        raise UnreadableHello("bytes follow the server name list in its extension")
    names = []
    while not entries.done:
        kind = entries.number(1)
        raw = entries.vector(2)
        if kind != _HOST_NAME:
            raise UnreadableHello(f"it names a server by something other than a host name ({kind})")
        names.append(_host_name(raw))
    if not names:
        raise UnreadableHello("its server_name extension names no server")
    return tuple(names)


def _host_name(raw: bytes) -> str:
    name = raw.decode("ascii", errors="replace").lower().removesuffix(".")
    if not raw.isascii() or not is_valid_name(name):
        raise UnreadableHello(f"its server name {raw[:253]!r} is not a host name")
    return name
