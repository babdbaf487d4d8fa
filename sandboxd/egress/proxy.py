"""The egress proxy: a sandbox's only way out, checked against its allowlist on the host.

The container has no network (network mode none); its supervisor's forwarder
(sandboxd.inside.egress_forwarder) relays 127.0.0.1:EGRESS_PORT to a Unix socket this proxy
listens on, one socket per sandbox, so the proxy knows whose connection it serves without
believing anything the container says. It speaks HTTP/1.1 forward proxying: `CONNECT
host:port` (HTTPS, opaque after the TLS ClientHello) and absolute-form requests
(`GET http://host/...`, one request per connection).

For each connection it checks the target as written against the allowlist, resolves the name
itself (sandboxd.egress.host_rules: special and host-own addresses only when an entry names them),
connects to the exact address it checked, and relays bytes. It never follows a redirect: the
client sees the 3xx and its next request is checked again. A refusal is a 403 whose body the
model can read. Connections at once and bytes in all are bounded per sandbox.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import logging
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from sandboxd.egress.host_rules import (
    Allowlist,
    IPAddress,
    is_special,
    is_valid_name,
    normalise_host,
    parse_address,
)
from sandboxd.egress.tls_hello import ACCESS_DENIED_ALERT, HANDSHAKE, UnreadableHello, server_names

logger = logging.getLogger(__name__)

BLOCKED = "blocked by sandbox policy: "
"""How every refusal starts; a connection cut for another reason (idle) was allowed."""
EGRESS_PORT = 3128
"""Inside the container: where the forwarder listens and HTTP(S)_PROXY point."""
_EGRESS_SOCKET_NAME = "egress"
"""In the sandbox's control directory: the Unix socket this proxy listens on."""
MAX_HEAD_BYTES = 16 * 1024
"""A request head (request line and headers, through the blank line that ends them) longer
than this is answered 431."""
_HEAD_END = b"\r\n\r\n"
_CHUNK_BYTES = 64 * 1024
"""Per connection and direction, the most the daemon holds in flight: 128 KiB a connection,
so egress_max_connections bounds a sandbox's share of the daemon's memory."""
_ACCEPT_RETRY_S = 0.1
_MAX_CLIENT_HELLO_BYTES = 5 + 16 * 1024
"""One TLS record: a ClientHello must fit in it for its server name to be checked."""


@dataclass(frozen=True)
class EgressSettings:
    """The daemon's egress bounds and, for tests and intranets, its own name table."""

    hosts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Names resolved from this table instead of DNS (addresses as text)."""
    max_connections: int = 64
    """Connections one sandbox may have open at once."""
    max_bytes: int = 4 * 1024**3
    """Bytes one sandbox may move through the proxy in all (both ways)."""
    connect_timeout_s: float = 10.0
    head_timeout_s: float = 10.0
    """How long a client may take to send its request head."""
    idle_timeout_s: float = 300.0
    """A relayed connection with no bytes either way for this long is closed."""


@dataclass(frozen=True)
class EgressEvent:
    """One connection, allowed or denied: an audit line."""

    host: str
    port: int
    allowed: bool
    reason: str
    """Why it was denied (starting with BLOCKED), why it was cut, or "" for a normal end."""
    method: str
    address: str = ""
    """The address connected to (empty when denied before that)."""
    bytes_up: int = 0
    bytes_down: int = 0
    duration_s: float = 0.0


class _Denied(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


_STATUS_TEXT = {
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    504: "Gateway Timeout",
}
_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
}


def host_addresses() -> frozenset[IPAddress]:
    """The host's own addresses (every interface), from /proc: refused unless named."""
    found: set[IPAddress] = set()
    with contextlib.suppress(OSError):
        lines = open("/proc/net/fib_trie", encoding="ascii").read().splitlines()  # noqa: SIM115
        for previous, line in itertools.pairwise(lines):
            if line.strip() == "/32 host LOCAL":
                candidate = previous.strip().removeprefix("|-- ")
                with contextlib.suppress(ValueError):
                    found.add(ipaddress.IPv4Address(candidate))
    with contextlib.suppress(OSError):
        for line in open("/proc/net/if_inet6", encoding="ascii"):  # noqa: SIM115
            hexed = line.split()[0]
            with contextlib.suppress(ValueError, IndexError):
                found.add(ipaddress.IPv6Address(int(hexed, 16)))
    return frozenset(found)


class EgressProxy:
    """One sandbox's proxy: its allowlist, its bounds, and a sink for its audit events."""

    def __init__(
        self,
        allowlist: Allowlist,
        settings: EgressSettings,
        *,
        own_addresses: Iterable[IPAddress] = (),
        on_event: Callable[[EgressEvent], None] = lambda event: None,
    ) -> None:
        self._allowlist = allowlist
        self._settings = settings
        self._own = frozenset(own_addresses)
        self._on_event = on_event
        self._open = 0
        self.bytes_used = 0

    async def serve(self, listener: anyio.abc.SocketListener) -> None:
        """Until cancelled. WHY not listener.serve(): one failed accept (out of file
        descriptors) or one handler's bug would end it, and the sandbox's way out with it."""
        async with anyio.create_task_group() as handlers:
            while True:
                try:
                    client = await listener.accept()
                except (OSError, anyio.BrokenResourceError) as exc:
                    logger.warning("the egress proxy cannot accept a connection: %s", exc)
                    await anyio.sleep(_ACCEPT_RETRY_S)
                    continue
                handlers.start_soon(self.handle, client)

    async def handle(self, client: anyio.abc.ByteStream) -> None:
        try:
            await self._handle_bounded(client)
        except Exception:
            logger.exception("the egress proxy failed on a connection")

    async def _handle_bounded(self, client: anyio.abc.ByteStream) -> None:
        async with client:
            if self._open >= self._settings.max_connections:
                reason = (
                    f"{BLOCKED}this sandbox has {self._open} connections open through its "
                    "proxy, the most it may have: close some, then retry"
                )
                await _refuse(client, 429, reason)
                self._emit(EgressEvent("", 0, False, reason, ""))
                return
            self._open += 1
            try:
                await self._handle(client)
            finally:
                self._open -= 1

    async def _handle(self, client: anyio.abc.ByteStream) -> None:
        started = time.monotonic()
        reader = BufferedByteReceiveStream(client)
        method, host, port = "", "", 0
        try:
            with anyio.fail_after(self._settings.head_timeout_s):
                head: bytes | None = await reader.receive_until(_HEAD_END, MAX_HEAD_BYTES)
        except TimeoutError:
            await _refuse(client, 408, "the proxy waited too long for a request head")
            return
        except anyio.DelimiterNotFound:
            head = None
        except (anyio.EndOfStream, anyio.IncompleteRead, OSError):
            return
        try:
            method, target, headers = _parse_head(_within_limit(head))
            body_bytes = 0
            if method == "CONNECT":
                host, port = _split_authority(target, default_port=None)
            else:
                host, port, target = _absolute_target(target, headers)
                body_bytes = _body_length(headers)
            self._check_target(host, port)
            address = await self._resolve(host, port)
            upstream = await self._connect(host, address, port)
        except _Denied as denied:
            await _refuse(client, denied.status, denied.reason)
            self._emit(EgressEvent(host, port, False, denied.reason, method))
            return
        counts = [0, 0]
        reason = ""
        async with upstream:
            try:
                if method == "CONNECT":
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    reason = await self._tunnel(reader, client, upstream, host, counts)
                else:
                    request = _origin_request(method, target, headers)
                    counts[0] += len(request)
                    await upstream.send(request)
                    # WHY only the body: bytes after it would be a second request to the
                    # same address with a Host nobody checked.
                    reason = await self._relay(reader, client, upstream, counts, body_bytes)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        self._emit(
            EgressEvent(
                host,
                port,
                not reason.startswith(BLOCKED),
                reason,
                method,
                str(address),
                counts[0],
                counts[1],
                round(time.monotonic() - started, 6),
            )
        )

    def _check_target(self, host: str, port: int) -> None:
        if not self._allowlist.allows(host, port):
            raise _Denied(
                403,
                f"blocked by sandbox policy: host {host} port {port} is not in the allowlist "
                f"(allowed: {', '.join(self._allowlist.entries) or 'none'})",
            )
        if self.bytes_used >= self._settings.max_bytes:
            raise _Denied(403, self._budget_reason())

    async def _resolve(self, host: str, port: int) -> IPAddress:
        """The first address of `host` the policy lets it reach; refuses with why not."""
        literal = parse_address(host)
        if literal is not None:
            candidates = [literal]
        else:
            candidates = await self._lookup(host, port)
        refused = []
        for address in candidates:
            if self._allowlist.names_address(address, port):
                return address
            if is_special(address):
                kind = _kind(address)
            elif address in self._own:
                kind = "this host's own address"
            else:
                return address
            for rule in self._allowlist.address_rules(address):
                ports = sorted(rule.ports or ())
                kind += f"; entry {rule.text} allows it on port{'s' * (len(ports) > 1)} "
                kind += f"{' and '.join(map(str, ports))} only"
            refused.append((address, kind))
        example = _entry(refused[0][0] if refused else None, port)
        raise _Denied(
            403,
            f"{BLOCKED}host {host} resolves only to addresses the allowlist does not name "
            f"with port {port}: {', '.join(f'{a} ({kind})' for a, kind in refused) or 'none'}; "
            f"add an address entry with that port (e.g. {example}) to allow it on purpose",
        )

    async def _lookup(self, host: str, port: int) -> list[IPAddress]:
        table = self._settings.hosts
        if host in table:
            texts: Iterable[str] = table[host]
        else:
            try:
                with anyio.fail_after(self._settings.connect_timeout_s):
                    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, TimeoutError) as exc:
                raise _Denied(502, f"the sandbox's proxy cannot resolve {host}: {exc}") from None
            texts = [str(info[4][0]) for info in infos]
        addresses = []
        for text in texts:
            address = parse_address(text.partition("%")[0])
            if address is not None and address not in addresses:
                addresses.append(address)
        return addresses

    async def _connect(self, host: str, address: IPAddress, port: int) -> anyio.abc.ByteStream:
        try:
            with anyio.fail_after(self._settings.connect_timeout_s):
                return await anyio.connect_tcp(str(address), port)
        except TimeoutError:
            raise _Denied(504, f"connecting to {host} ({address}) port {port} timed out") from None
        except OSError as exc:
            raise _Denied(
                502, f"cannot connect to {host} ({address}) port {port}: {exc.strerror or exc}"
            ) from None

    async def _tunnel(
        self,
        reader: BufferedByteReceiveStream,
        client: anyio.abc.ByteStream,
        upstream: anyio.abc.ByteStream,
        host: str,
        counts: list[int],
    ) -> str:
        """Relay a CONNECT tunnel, which must start with a TLS ClientHello naming `host` (or
        no name at all).

        WHY TLS only: plain HTTP in a tunnel could name any virtual host of the allowed
        address in a Host header the proxy never sees; plain HTTP goes as an absolute-form
        request instead, whose Host is checked."""
        first = b""
        with anyio.move_on_after(self._settings.head_timeout_s):
            first = await _first_record(reader)
        if first[:1] != bytes((HANDSHAKE,)):
            return (
                "blocked by sandbox policy: a CONNECT tunnel must carry TLS (send plain HTTP "
                "as http:// through the proxy)"
            )
        refused = _hello_refusal(first, host)
        if refused is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await client.send(ACCESS_DENIED_ALERT)
            return refused
        counts[0] += len(first)
        await upstream.send(first)
        return await self._relay(reader, client, upstream, counts)

    async def _relay(
        self,
        reader: BufferedByteReceiveStream,
        client: anyio.abc.ByteStream,
        upstream: anyio.abc.ByteStream,
        counts: list[int],
        up_bytes: int | None = None,
    ) -> str:
        """Copy both ways until either side closes, the sandbox's byte budget is spent, or
        nothing moves for idle_timeout_s; returns why it was cut ("" for a normal end).
        `up_bytes`: the client sends only that many (a request's body), then only listens."""
        reason = ""
        last = time.monotonic()

        async with anyio.create_task_group() as relay:

            async def pump(
                source: anyio.abc.ByteReceiveStream,
                sink: anyio.abc.ByteStream,
                up: int,
                most: int | None = None,
            ) -> None:
                nonlocal reason, last
                try:
                    while True:
                        if most is not None and counts[up] >= most:
                            return  # the whole body went: the answer may still come
                        wanted = (
                            _CHUNK_BYTES if most is None else min(_CHUNK_BYTES, most - counts[up])
                        )
                        chunk = await source.receive(wanted)
                        last = time.monotonic()
                        counts[up] += len(chunk)
                        self.bytes_used += len(chunk)
                        if self.bytes_used > self._settings.max_bytes:
                            reason = self._budget_reason()
                            break
                        await sink.send(chunk)
                except (
                    anyio.EndOfStream,
                    anyio.BrokenResourceError,
                    anyio.ClosedResourceError,
                    OSError,
                ):
                    pass
                relay.cancel_scope.cancel()

            async def watch() -> None:
                nonlocal reason
                while True:
                    await anyio.sleep(
                        max(0.0, last + self._settings.idle_timeout_s - time.monotonic())
                    )
                    if time.monotonic() - last >= self._settings.idle_timeout_s:
                        reason = f"idle for {self._settings.idle_timeout_s:g} s"
                        relay.cancel_scope.cancel()
                        return

            relay.start_soon(
                pump, reader, upstream, 0, None if up_bytes is None else counts[0] + up_bytes
            )
            relay.start_soon(pump, upstream, client, 1)
            relay.start_soon(watch)
        return reason

    def _budget_reason(self) -> str:
        return (
            f"blocked by sandbox policy: this sandbox has moved {self._settings.max_bytes} bytes "
            "through its proxy, all it may"
        )

    def _emit(self, event: EgressEvent) -> None:
        self._on_event(event)


def _entry(address: IPAddress | None, port: int) -> str:
    """An allowlist entry for `address` (or a private network) at `port`, as a hint."""
    if address is None:
        return f"10.0.0.0/8:{port}"
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def _kind(address: IPAddress) -> str:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_unspecified:
        return "unspecified"
    if address.is_private:
        return "private"
    return "not a public address"


def _hello_refusal(record: bytes, host: str) -> str | None:
    """Why a tunnel to `host` whose first record is `record` is refused, or None: its
    ClientHello must name no server, or `host` alone."""
    try:
        names = server_names(record)
    except UnreadableHello as unreadable:
        return f"{BLOCKED}a TLS ClientHello the proxy cannot check: {unreadable}"
    if len(names) > 1:
        return (
            f"{BLOCKED}a TLS ClientHello naming {len(names)} servers "
            f"({', '.join(names)[:300]}): name one, the CONNECT host {host}"
        )
    if names and names[0] != host:
        return f"{BLOCKED}TLS server name {names[0]!r} differs from the CONNECT host {host}"
    return None


async def _refuse(client: anyio.abc.ByteStream, status: int, reason: str) -> None:
    body = (reason + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "X-Sandbox-Policy: blocked\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        with anyio.fail_after(5):
            await client.send(head + body)


def _within_limit(head: bytes | None) -> bytes:
    """`head` (without its blank line; None when MAX_HEAD_BYTES came without one) if it
    fits MAX_HEAD_BYTES. WHY measured again: receive_until stops reading once it holds
    MAX_HEAD_BYTES, but finds the blank line in whatever its last read brought."""
    if head is not None and len(head) + len(_HEAD_END) <= MAX_HEAD_BYTES:
        return head
    measured = (
        f"has no end within the {MAX_HEAD_BYTES} bytes"
        if head is None
        else f"is {len(head) + len(_HEAD_END)} bytes, more than the {MAX_HEAD_BYTES}"
    )
    raise _Denied(
        431,
        f"{BLOCKED}the request head (request line and headers) {measured} the sandbox's proxy "
        "takes: send fewer or shorter headers",
    )


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise _Denied(400, "the request head is not text") from None
    request_line, *lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Denied(400, f"not an HTTP/1.x proxy request: {request_line[:200]!r}")
    headers = []
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise _Denied(400, f"a malformed header line: {line[:200]!r}")
        headers.append((name, value.strip()))
    return parts[0], parts[1], headers


def _split_authority(authority: str, *, default_port: int | None) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest.removeprefix(":") if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise _Denied(400, f"a malformed target {authority[:200]!r}")
    else:
        host, _, port_text = authority.rpartition(":") if ":" in authority else (authority, "", "")
    host = normalise_host(host)
    if not port_text:
        if default_port is None:
            raise _Denied(400, f"CONNECT needs host:port, got {authority[:200]!r}")
        port = default_port
    elif port_text.isdigit() and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise _Denied(400, f"a bad port in {authority[:200]!r}")
    if parse_address(host) is None and not is_valid_name(host):
        raise _Denied(400, f"{host[:253]!r} is not a host name or address")
    return host, port


def _absolute_target(target: str, headers: list[tuple[str, str]]) -> tuple[str, int, str]:
    """(host, port, path) of `http://host[:port]/path`, whose Host header must name it."""
    if not target.lower().startswith("http://"):
        raise _Denied(
            400,
            "the sandbox's proxy takes absolute http:// requests and CONNECT (for https): "
            f"got {target[:200]!r}",
        )
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise _Denied(400, "credentials in the URL are not passed through the proxy")
    host, port = _split_authority(authority, default_port=80)
    hosts = [value for name, value in headers if name.lower() == "host"]
    if len(hosts) != 1:
        raise _Denied(400, "an absolute-form request needs exactly one Host header")
    header_host, header_port = _split_authority(hosts[0], default_port=80)
    if (header_host, header_port) != (host, port):
        raise _Denied(
            403,
            f"blocked by sandbox policy: the Host header {hosts[0][:200]!r} differs from the "
            f"request's target {host}:{port}",
        )
    return host, port, slash + path


def _body_length(headers: list[tuple[str, str]]) -> int:
    """The request body's length: a Content-Length, or none. WHY not chunked: its end is
    where a second, unchecked request would begin, and only a parse could find it."""
    if any(name.lower() == "transfer-encoding" for name, _ in headers):
        raise _Denied(
            411,
            "the sandbox's proxy takes a request body only with a Content-Length, not "
            "chunked: send its length, or use https:// (a tunnel)",
        )
    lengths = {value for name, value in headers if name.lower() == "content-length"}
    if not lengths:
        return 0
    if len(lengths) > 1 or not next(iter(lengths)).isdigit():
        raise _Denied(400, "a request with a malformed or repeated Content-Length")
    return int(next(iter(lengths)))


def _origin_request(method: str, path: str, headers: list[tuple[str, str]]) -> bytes:
    """The request for the origin server: origin-form, no hop-by-hop headers, one request."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    kept = [
        f"{name}: {value}\r\n"
        for name, value in headers
        if name.lower() not in _HOP_HEADERS and name.lower() not in named
    ]
    return (f"{method} {path or '/'} HTTP/1.1\r\n{''.join(kept)}Connection: close\r\n\r\n").encode(
        "latin-1"
    )


async def _first_record(reader: BufferedByteReceiveStream) -> bytes:
    """The client's first bytes: when they start a TLS record, that one record (what follows
    stays in `reader`); b"" when the client sent fewer than 5 bytes before it closed."""
    try:
        header = await reader.receive_exactly(5)
        size = int.from_bytes(header[3:5], "big")
        if header[0] != HANDSHAKE or 5 + size > _MAX_CLIENT_HELLO_BYTES:
            return header
        return header + await reader.receive_exactly(size)
    except (anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return b""
