"""The egress proxy's decisions that need no sandbox: spoken to over its real Unix socket.

Every refusal here comes before the proxy connects anywhere, so the made-up addresses below
are never contacted."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import pytest

from sandboxd.egress.host_rules import Allowlist
from sandboxd.egress.proxy import MAX_HEAD_BYTES, EgressEvent, EgressProxy, EgressSettings
from sandboxd.egress.tls_hello import ACCESS_DENIED_ALERT
from sandboxd.server.audit import AUDIT_LINE_MAX_BYTES, EgressRecord, audit_line
from tests.support.sandboxd_harness import short_dir
from tests.support.tls_hellos import (
    client_hello,
    split_in_two_records,
    with_names,
    with_second_name_extension,
)

pytestmark = pytest.mark.anyio

OWN = "151.101.0.223"
"""Stands for the host's own public address."""


@contextlib.asynccontextmanager
async def _proxy(
    entries: list[str], settings: EgressSettings
) -> AsyncIterator[tuple[str, list[EgressEvent]]]:
    """A proxy for `entries` on a Unix socket of its own: (its path, its audit events)."""
    events: list[EgressEvent] = []
    proxy = EgressProxy(
        Allowlist.parse(entries),
        settings,
        own_addresses=[ipaddress.ip_address(OWN)],
        on_event=events.append,
    )
    path = str(short_dir("egress") / "egress")
    listener = await anyio.create_unix_listener(path)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(proxy.serve, listener)
        yield path, events
        tasks.cancel_scope.cancel()


@pytest.fixture
async def proxy_socket() -> AsyncIterator[tuple[str, list[EgressEvent]]]:
    settings = EgressSettings(hosts={"own.test": (OWN,)}, head_timeout_s=2)
    async with _proxy(["own.test", "web.test:*"], settings) as served:
        yield served


async def _ask(path: str, request: bytes) -> str:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(request)
        answer = b""
        with anyio.fail_after(10):
            try:
                while True:
                    answer += await stream.receive()
            except anyio.EndOfStream:
                pass
    return answer.decode()


async def test_the_hosts_own_address_is_refused(
    proxy_socket: tuple[str, list[EgressEvent]],
) -> None:
    path, events = proxy_socket
    answer = await _ask(path, b"CONNECT own.test:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith("HTTP/1.1 403 Forbidden\r\n")
    assert f"{OWN} (this host's own address)" in answer
    assert events[-1].host == "own.test" and not events[-1].allowed


@contextlib.asynccontextmanager
async def _loopback_web() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A server on the host's loopback that keeps each connection's first bytes and answers
    an HTTP request head with `reached`: (its port, what it received)."""
    received: list[bytes] = []

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                received.append(await stream.receive())
                if b"\r\n\r\n" in received[-1]:
                    await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nreached\n")

    async with (
        await anyio.create_tcp_listener(local_host="127.0.0.1") as listener,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(listener.serve, answer)
        yield listener.extra(anyio.abc.SocketAttribute.local_port), received
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize("method", ["GET", "CONNECT"])
@pytest.mark.parametrize(
    ("entries", "explains"),
    [
        (["web.test:*", "127.0.0.1"], "; entry 127.0.0.1 allows it on ports 80 and 443 only)"),
        (["web.test:{port}", "127.0.0.1:1"], "; entry 127.0.0.1:1 allows it on port 1 only)"),
        (["web.test:{port}", "127.0.0.0/8"], "; entry 127.0.0.0/8 allows it on ports 80 and"),
        (["web.test:{port}", "127.0.0.1:443", "10.0.0.0/8:{port}"], "(loopback; entry"),
    ],
)
async def test_a_name_reaches_a_special_address_only_on_a_port_an_address_entry_allows(
    entries: list[str], explains: str, method: str
) -> None:
    """The attack: an allowed name that resolves to loopback, on a port no entry naming
    loopback allows. A real server listens there: reaching it would answer `reached`."""
    async with _loopback_web() as (port, _):
        allowlist = [entry.format(port=port) for entry in entries]
        settings = EgressSettings(hosts={"web.test": ("127.0.0.1",)})
        async with _proxy(allowlist, settings) as (path, events):
            answer = await _ask(path, _request(method, f"web.test:{port}"))
    assert answer.startswith("HTTP/1.1 403 Forbidden\r\n"), answer
    assert (
        f"blocked by sandbox policy: host web.test resolves only to addresses the allowlist "
        f"does not name with port {port}: 127.0.0.1 (loopback"
    ) in answer
    assert explains in answer
    assert f"(e.g. 127.0.0.1:{port}) to allow it on purpose" in answer
    assert events[-1].host == "web.test" and not events[-1].allowed


@pytest.mark.parametrize("method", ["GET", "CONNECT"])
async def test_an_address_entry_with_the_port_lets_the_name_reach_it(method: str) -> None:
    async with _loopback_web() as (port, _):
        settings = EgressSettings(hosts={"web.test": ("127.0.0.1",)}, head_timeout_s=1)
        async with _proxy(_web_on(port), settings) as (path, events):
            answer = await _ask(path, _request(method, f"web.test:{port}"))
    expected = "HTTP/1.1 200 OK\r\n" if method == "GET" else "HTTP/1.1 200 Connection established"
    assert answer.startswith(expected), answer
    assert events[-1].address == "127.0.0.1"  # connected (a tunnel then needs TLS)


def _request(method: str, authority: str) -> bytes:
    """A proxy request for `authority`: absolute-form GET, or CONNECT."""
    target = f"http://{authority}/" if method == "GET" else authority
    return f"{method} {target} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode()


@pytest.mark.parametrize(
    "request_line",
    [
        b"CONNECT /run/sandboxd.sock HTTP/1.1",
        b"CONNECT unix:/run/sandboxd.sock:80 HTTP/1.1",
        b"GET http+unix://%2Frun%2Fsandboxd.sock/v1/health HTTP/1.1",
        b"GET /v1/health HTTP/1.1",
        b"CONNECT web.test HTTP/1.1",
    ],
)
async def test_targets_that_are_not_host_and_port_are_refused(
    proxy_socket: tuple[str, list[EgressEvent]], request_line: bytes
) -> None:
    answer = await _ask(proxy_socket[0], request_line + b"\r\nHost: web.test\r\n\r\n")
    assert answer.startswith("HTTP/1.1 400 Bad Request\r\n"), answer


async def test_an_endless_request_head_is_cut(proxy_socket: tuple[str, list[EgressEvent]]) -> None:
    answer = await _ask(proxy_socket[0], b"GET http://web.test/ HTTP/1.1\r\n" + b"X: y\r\n" * 5000)
    assert answer.startswith("HTTP/1.1 431 ")


def _padded_head(method: str, size: int) -> bytes:
    """A request for other.test (not allowed) whose head, through its blank line, is `size`
    bytes."""
    head = _request(method, "other.test:80")[: -len(b"\r\n")] + b"X-Pad: \r\n\r\n"
    return head[: -len(b"\r\n\r\n")] + b"a" * (size - len(head)) + b"\r\n\r\n"


@pytest.mark.parametrize("method", ["GET", "CONNECT"])
@pytest.mark.parametrize(
    ("size", "status"),
    [(MAX_HEAD_BYTES, "403 Forbidden"), (MAX_HEAD_BYTES + 1, "431 "), (17_000, "431 ")],
)
async def test_a_request_head_is_measured_through_its_blank_line(
    proxy_socket: tuple[str, list[EgressEvent]], method: str, size: int, status: str
) -> None:
    """Sent at once: the whole head comes in the read that crosses the limit."""
    path, events = proxy_socket
    head = _padded_head(method, size)
    assert len(head) == size
    answer = await _ask(path, head)
    assert answer.startswith(f"HTTP/1.1 {status}"), answer[:200]
    if size > MAX_HEAD_BYTES:
        assert (
            f"blocked by sandbox policy: the request head (request line and headers) is {size} "
            f"bytes, more than the {MAX_HEAD_BYTES} the sandbox's proxy takes: send fewer or "
            "shorter headers"
        ) in answer
        assert not events[-1].allowed and events[-1].reason in answer


@pytest.mark.parametrize("method", ["GET", "CONNECT"])
async def test_a_request_head_trickled_in_pieces_is_measured_whole(
    proxy_socket: tuple[str, list[EgressEvent]], method: str
) -> None:
    """17,000 bytes in pieces of 1,000: the last piece, which holds the blank line, takes
    the head past the limit after the proxy has read 16,000 bytes without it."""
    head = _padded_head(method, 17_000)
    async with await anyio.connect_unix(proxy_socket[0]) as stream:
        for at in range(0, len(head), 1000):
            await stream.send(head[at : at + 1000])
            await anyio.sleep(0.01)
        answer = b""
        with anyio.fail_after(10), contextlib.suppress(anyio.EndOfStream):
            while True:
                answer += await stream.receive()
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer
    assert b"is 17000 bytes, more than the 16384" in answer


async def test_a_silent_client_is_let_go(proxy_socket: tuple[str, list[EgressEvent]]) -> None:
    answer = await _ask(proxy_socket[0], b"CONNECT web.test:443 HTTP/1.1\r\n")
    assert answer.startswith("HTTP/1.1 408 ")


def _web_on(port: int) -> list[str]:
    """The allowlist of web.test on `port`, which resolves to loopback, named on purpose."""
    return [f"web.test:{port}", f"127.0.0.1:{port}"]


@pytest.mark.parametrize(
    ("first", "says"),
    [
        (
            with_names(b"web.test", b"evil.test"),
            "a TLS ClientHello naming 2 servers (web.test, evil.test): name one, the CONNECT "
            "host web.test",
        ),
        (with_names(b"web.test", b"web.test"), "a TLS ClientHello naming 2 servers"),
        (
            with_second_name_extension(b"evil.test"),
            "a TLS ClientHello the proxy cannot check: it carries two server_name extensions",
        ),
        (
            b"".join(split_in_two_records(client_hello("evil.test"))),
            "a TLS ClientHello the proxy cannot check: the ClientHello is split across TLS "
            "records: send it in one record (16 KiB)",
        ),
        (with_names(b" web.test"), "its server name b' web.test' is not a host name"),
        (with_names(b"[web.test]"), "its server name b'[web.test]' is not a host name"),
        (client_hello("evil.test"), "TLS server name 'evil.test' differs from the CONNECT host"),
    ],
)
async def test_a_tunnel_whose_hello_could_name_another_server_is_refused(
    first: bytes, says: str
) -> None:
    """The attack: a CONNECT to an allowed host whose ClientHello names another server to a
    server that reads it another way. Nothing reaches the (real, loopback) server, and the
    client's TLS reads an access_denied alert."""
    async with _loopback_web() as (port, received):
        settings = EgressSettings(hosts={"web.test": ("127.0.0.1",)})
        async with _proxy(_web_on(port), settings) as (path, events):
            connect = f"CONNECT web.test:{port} HTTP/1.1\r\n\r\n".encode()
            answer = await _ask(path, connect + first)
    assert received == []
    assert answer.encode() == b"HTTP/1.1 200 Connection established\r\n\r\n" + ACCESS_DENIED_ALERT
    (event,) = events
    assert not event.allowed and event.reason.startswith("blocked by sandbox policy: ")
    assert says in event.reason


@pytest.mark.parametrize("name", [b"web.test", b"WEB.test.", None])
async def test_a_hello_naming_the_connect_host_or_none_reaches_it(name: bytes | None) -> None:
    hello = client_hello(None) if name is None else with_names(name)
    async with _loopback_web() as (port, received):
        settings = EgressSettings(hosts={"web.test": ("127.0.0.1",)})
        async with _proxy(_web_on(port), settings) as (path, events):
            answer = await _ask(path, f"CONNECT web.test:{port} HTTP/1.1\r\n\r\n".encode() + hello)
    assert answer == "HTTP/1.1 200 Connection established\r\n\r\n"
    assert received == [hello] and events[-1].allowed


async def test_a_silent_tunnel_is_cut_and_still_counted_as_allowed() -> None:
    """Against a server of the test's own on loopback, which the allowlist names."""
    events: list[EgressEvent] = []
    proxy = EgressProxy(
        Allowlist.parse(["127.0.0.1:*"]),
        EgressSettings(idle_timeout_s=0.5),
        on_event=events.append,
    )
    path = str(short_dir("egress") / "egress")
    hello = client_hello(None)
    async with (
        await anyio.create_tcp_listener(local_host="127.0.0.1") as silent,
        await anyio.create_unix_listener(path) as listener,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(silent.serve, _keep_silent)
        tasks.start_soon(proxy.serve, listener)
        port = silent.extra(anyio.abc.SocketAttribute.local_port)
        answer = await _ask(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode() + hello)
        tasks.cancel_scope.cancel()
    assert answer == "HTTP/1.1 200 Connection established\r\n\r\n"
    (event,) = events
    assert (event.allowed, event.reason, event.bytes_up) == (True, "idle for 0.5 s", len(hello))


async def _keep_silent(stream: anyio.abc.SocketStream) -> None:
    """Take what comes, answer nothing, until the proxy hangs up (or 10 s)."""
    async with stream:
        with anyio.move_on_after(10), contextlib.suppress(anyio.EndOfStream):
            while True:
                await stream.receive()


def test_an_egress_audit_line_is_bounded() -> None:
    record = EgressRecord(
        time="now",
        session="s" * 5000,
        sandbox="box",
        host="h" * 5000,
        port=443,
        allowed=False,
        reason="r" * 100_000,
        method="CONNECT",
        address=None,
        bytes_up=0,
        bytes_down=0,
        duration_s=0.0,
    )
    line = audit_line(record)
    assert len(line) <= AUDIT_LINE_MAX_BYTES and b'"reason_bytes":100000' in line
