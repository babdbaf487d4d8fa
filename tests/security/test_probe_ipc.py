"""Attack: reach a host program through IPC: Unix sockets (named and abstract), System V
shared memory, io_uring, from any process of the container.

Probes: botb's and CDK's socket scans (a Docker or containerd socket, an ssh agent found
under a mount), deepce's and linPEAS's IPC checks, amicontained's seccomp listing. Named
sockets under a mount through a command's own socket() are in test_unix_sockets.py; here,
what holds when the attacker looks beyond its own process: every process of the container
must carry the guards a command carries (issue 33, finding 1: PID 1 did not).
"""

from __future__ import annotations

import ctypes
import os
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sandbox_probe import probe, x86_64_only
from tests.support.sandboxd_harness import Daemon

pytestmark = [pytest.mark.docker, x86_64_only]

FILTERS = """
def status(pid):
    with open(f"/proc/{pid}/status") as lines:
        return dict(line.rstrip("\\n").split(":\\t", 1) for line in lines if ":\\t" in line)


mine = int(status("self")["Seccomp_filters"])
for entry in sorted(os.listdir("/proc"), key=lambda e: e.zfill(9)):
    if entry.isdigit() and int(entry) != os.getpid():
        seen = status(entry)
        print(entry, seen["Name"], seen["Seccomp"], int(seen["Seccomp_filters"]) >= mine)
"""


@pytest.mark.parametrize(
    "settings",
    [{}, {"allowed_hosts": ["example.org"]}],
    ids=["plain", "with an egress forwarder"],
)
def test_every_process_carries_the_filters_a_command_carries(
    daemon: Daemon, settings: dict[str, Any]
) -> None:
    """What refuses socket(AF_UNIX) and io_uring to a command must hold in PID 1, the
    supervisor and the egress forwarder too (a command that gets one of them to make the
    call, by ptrace or otherwise, would have it): no process has fewer seccomp filters than
    the command itself, in filter mode (2)."""
    with daemon.client() as client:
        seen = probe(client, FILTERS, **settings)
    rows = [line.split() for line in seen.splitlines()]
    assert rows, seen
    weaker = [row for row in rows if row[2:] != ["2", "True"]]
    assert weaker == [], f"processes without the command's filters (pid name mode): {weaker}"


ABSTRACT = """
import socket
try:
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    peer.connect(b"\\0" + sys.argv[1].encode())
    print("connected")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""


@pytest.fixture
def abstract_host_socket() -> Iterator[tuple[str, socket.socket]]:
    """A host program listening on an abstract Unix socket (no file: X11's and some agents'
    kind), in the host's network namespace."""
    name = f"sandboxd-probe-{uuid.uuid4().hex[:12]}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(b"\0" + name.encode())
    server.listen()
    server.setblocking(False)
    with server:
        yield name, server


def test_a_host_programs_abstract_socket_is_unreachable(
    daemon: Daemon, abstract_host_socket: tuple[str, socket.socket]
) -> None:
    """Abstract sockets have no file to deny (CVE-2020-15257, CDK's containerd-shim-pwn:
    the shim's abstract socket in the host's network namespace): a sandbox reaches none."""
    name, server = abstract_host_socket
    with daemon.client() as client:
        outcome = probe(client, ABSTRACT, name)
    assert outcome in {"EPERM", "ECONNREFUSED"}, outcome
    with pytest.raises(BlockingIOError):
        server.accept()


SYSV = "print(syscall(29, int(sys.argv[1]), 0, 0))  # shmget(key, 0, 0): find it"


def test_the_hosts_system_v_shared_memory_is_unreachable(daemon: Daemon) -> None:
    """linPEAS lists System V IPC: a host segment's key finds nothing in the sandbox."""
    libc = ctypes.CDLL(None, use_errno=True)
    key = uuid.uuid4().int % 2**31
    segment = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    assert segment >= 0, os.strerror(ctypes.get_errno())
    try:
        with daemon.client() as client:
            outcome = probe(client, SYSV, str(key))
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID
    assert outcome == "ENOENT", outcome


FAMILIES = """
import socket
for family, kind in ((2, 2), (10, 2), (16, 2), (17, 3), (38, 5), (40, 1), (31, 3), (30, 5)):
    try:
        socket.socket(family, kind, 0).close()
        print(family, "made")
    except OSError as exc:
        print(family, errno.errorcode.get(exc.errno, exc.errno))
"""


def test_only_ip_and_netlink_sockets_can_be_made(daemon: Daemon) -> None:
    """linPEAS's and CDK's kernel surface checks: a socket of a rarely used family (packet,
    the kernel's crypto API, vsock to the hypervisor, Bluetooth, TIPC) is where kernel
    exploits of containers have started. Only IPv4, IPv6 and netlink are made; the rest is
    refused by the container's profile, whatever the process's capabilities."""
    with daemon.client() as client:
        seen = dict(line.split() for line in probe(client, FAMILIES).splitlines())
    assert seen == {
        "2": "made",
        "10": "made",
        "16": "made",
        "17": "EPERM",
        "38": "EPERM",
        "40": "EPERM",
        "31": "EPERM",
        "30": "EPERM",
    }, seen


PROTOCOLS = """
import socket
tries = {
    "tcp": (2, 1, 0), "tcp explicit": (2, 1, 6), "udp": (2, 2, 0), "udp explicit": (2, 2, 17),
    "tcp6": (10, 1, 0), "tcp6 explicit": (10, 1, 6),
    "udp6": (10, 2, 0), "udp6 explicit": (10, 2, 17),
    "tcp nonblocking": (2, 1 | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, 0),
    "route netlink": (16, 3, 0), "route netlink dgram": (16, 2, 0),
    "mptcp": (2, 1, 262), "mptcp6": (10, 1, 262), "udplite": (2, 2, 136), "udplite6": (10, 2, 136),
    "sctp": (2, 5, 132), "sctp stream": (2, 1, 132), "sctp6": (10, 5, 132),
    "ping": (2, 2, 1), "ping6": (10, 2, 58), "raw": (2, 3, 0), "seqpacket": (2, 5, 0),
    "sock_diag netlink": (16, 3, 4), "audit netlink": (16, 3, 9), "uevent netlink": (16, 2, 15),
    "xfrm netlink": (16, 3, 6), "generic netlink": (16, 3, 16),
}
for name, (family, kind, protocol) in tries.items():
    try:
        socket.socket(family, kind, protocol).close()
        print(name.replace(" ", "-"), "made")
    except OSError as exc:
        print(name.replace(" ", "-"), errno.errorcode.get(exc.errno, exc.errno))
"""


def test_ip_sockets_are_tcp_or_udp_and_netlink_only_route(daemon: Daemon) -> None:
    """The kernel code behind a socket's protocol is surface too: MPTCP, UDP-Lite, SCTP, ping
    sockets and netlink's other protocols (sock_diag, audit, uevents, xfrm, generic) have had
    their exploits. The profile lets IPv4 and IPv6 make TCP and UDP sockets only (protocol 0
    or named), and netlink only NETLINK_ROUTE (what `ip` and getifaddrs read)."""
    with daemon.client() as client:
        seen = dict(line.split() for line in probe(client, PROTOCOLS).splitlines())
    made = ["tcp", "tcp-explicit", "udp", "udp-explicit", "tcp6", "tcp6-explicit", "udp6"]
    made += ["udp6-explicit", "tcp-nonblocking", "route-netlink", "route-netlink-dgram"]
    assert {name: seen.pop(name) for name in made} == dict.fromkeys(made, "made")
    assert seen == dict.fromkeys(seen, "EPERM") and len(seen) == 16, seen
