"""Attack: reach the network from a sandbox without it, or beyond the egress proxy of one
with an allowlist.

Probes: deepce's and CDK's network checks (raw sockets, the host's bridge address, cloud
metadata), SandboxEscapeBench's exfiltration tasks (DNS, IPv6, UDP), linPEAS's interface
and listening-port listing. The allowlist's own rules are tested in test_egress.py.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sandbox_probe import probe
from tests.support.sandboxd_harness import Daemon

pytestmark = pytest.mark.docker

CONNECT = """
import socket
family, kind, host, port = sys.argv[1:]
family = socket.AF_INET6 if family == "inet6" else socket.AF_INET
kind = socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
peer = socket.socket(family, kind)
peer.settimeout(5)
try:
    if kind == socket.SOCK_DGRAM:
        peer.sendto(b"probe", (host, int(port)))
        peer.recv(10)
    else:
        peer.connect((host, int(port)))
    print("reached")
except OSError as exc:
    print(errno.errorcode.get(exc.errno, type(exc).__name__))
"""

TARGETS = {
    "a public address": ("inet", "tcp", "1.1.1.1", "443"),
    "a public resolver over UDP": ("inet", "udp", "8.8.8.8", "53"),
    "the cloud metadata address": ("inet", "tcp", "169.254.169.254", "80"),
    "the engine's bridge (the host)": ("inet", "tcp", "172.17.0.1", "22"),
    "a public IPv6 address": ("inet6", "tcp", "2606:4700:4700::1111", "443"),
}
NO_WAY = {"ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL", "EAFNOSUPPORT"}


@pytest.mark.parametrize(
    "settings", [{}, {"allowed_hosts": ["example.org"]}], ids=["off", "allowlist"]
)
@pytest.mark.parametrize("target", list(TARGETS))
def test_nothing_is_reachable_but_through_the_proxy(
    daemon: Daemon, target: str, settings: dict[str, Any]
) -> None:
    """Direct connections have no route, with the network off and with an allowlist (whose
    one way out is the proxy, tried in test_egress.py)."""
    with daemon.client() as client:
        outcome = probe(client, CONNECT, *TARGETS[target], **settings)
    assert outcome in NO_WAY, f"{target}: {outcome}"


@pytest.fixture
def host_loopback_service() -> Iterator[int]:
    """A service on the host's loopback (a database, a dev server): its port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_the_hosts_loopback_is_not_the_sandboxs(daemon: Daemon, host_loopback_service: int) -> None:
    """The sandbox's 127.0.0.1 is its own: a host service there is not reached."""
    with daemon.client() as client:
        outcome = probe(client, CONNECT, "inet", "tcp", "127.0.0.1", str(host_loopback_service))
    assert outcome == "ECONNREFUSED", outcome


RAW = """
import socket
for name, family, kind, proto in [
    ("raw icmp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    ("raw ipv6", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    ("packet", socket.AF_PACKET, socket.SOCK_RAW, 0),
]:
    try:
        socket.socket(family, kind, proto).close()
        print(name, "created")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
"""


def test_no_raw_or_packet_socket(daemon: Daemon) -> None:
    """deepce's CAP_NET_RAW check: crafting packets (spoofing, scanning) needs a raw or a
    packet socket, which a process without the capability cannot make."""
    with daemon.client() as client:
        seen = probe(client, RAW)
    outcomes = dict(line.rsplit(" ", 1) for line in seen.splitlines())
    assert len(outcomes) == 3 and set(outcomes.values()) == {"EPERM"}, outcomes


LOOK_AROUND = """
import socket
interfaces = sorted(os.listdir("/sys/class/net"))
with open("/proc/net/tcp") as tcp, open("/proc/net/tcp6") as tcp6:
    rows = [line.split() for line in [*tcp.readlines()[1:], *tcp6.readlines()[1:]]]
listening = sorted(row[1] for row in rows if row[3] == "0A")
try:
    socket.getaddrinfo("example.org", 443)
    resolved = "resolved"
except socket.gaierror as exc:
    resolved = "unresolved"
print(*interfaces, "|", *listening, "|", resolved)
"""


@pytest.mark.parametrize(
    "settings", [{}, {"allowed_hosts": ["example.org"]}], ids=["off", "allowlist"]
)
def test_only_loopback_and_no_name_service(daemon: Daemon, settings: dict[str, Any]) -> None:
    """linPEAS's look around: the only interface is loopback, the only listening port is
    the proxy's forwarder (127.0.0.1:3128 = 0100007F:0C38) when there is an allowlist, and
    names do not resolve (the proxy resolves them itself)."""
    with daemon.client() as client:
        interfaces, listening, resolved = probe(client, LOOK_AROUND, **settings).split("|")
    assert interfaces.split() == ["lo"], interfaces
    expected = ["0100007F:0C38"] if settings else []
    assert listening.split() == expected, listening
    assert resolved.strip() == "unresolved"
