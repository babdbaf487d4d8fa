"""Probes of public escape suites, run for real inside a sandbox of a real daemon.

A probe is a Python script run by the sandbox's python3 (the image has it); it prints what
happened, and the test reads that as the attacker would. The helpers here start it, give
scripts the system calls they try (x86-64 numbers: the suites' probes are written for it),
and stand in for a host program listening on a Unix socket under a grant.
"""

from __future__ import annotations

import os
import platform
import shlex
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

x86_64_only = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the probes' system call numbers are x86-64's"
)

SYSCALLS = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def syscall(nr, *args):
    '''The call's result as the probe reports it: "ok" or the errno's name.'''
    ctypes.set_errno(0)
    arguments = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(nr, *arguments) >= 0:
        return "ok"
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def opened(path, flags):
    '''Whether `path` opens with `flags`: "opened" or the errno's name.'''
    try:
        os.close(os.open(path, flags))
        return "opened"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


def outside_pids():
    '''The container's processes the command did not start: those of other sessions
    (PID 1 and the supervisor, which start each command in a session of its own).'''
    mine = os.getsid(0)
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) != mine:
                    found.append(int(entry))
            except OSError:
                pass
    return sorted(found)
"""
"""A preamble for probe scripts: `syscall`, `opened` and `outside_pids`."""


def run_python(client: httpx.Client, script: str, *args: str, **fields: Any) -> dict[str, Any]:
    """The daemon's answer to `python3 -c SCRIPT ARGS` in a sandbox (`fields` are the
    request's others: session, allowed_paths...); it must have run."""
    command = shlex.join(["python3", "-c", script, *args])
    response = client.post("/v1/run", json={"command": command, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] is None, body
    return body


def probe(client: httpx.Client, script: str, *args: str, **fields: Any) -> str:
    """What a probe (`SYSCALLS` + `script`) printed, stripped; its errors in the message."""
    body = run_python(client, SYSCALLS + script, *args, **fields)
    assert body["exit_code"] == 0, body
    return str(body["stdout"]).strip()


@contextmanager
def host_server(
    path: Path, kind: int = socket.SOCK_STREAM, reply: bytes | None = None
) -> Iterator[list[bytes]]:
    """A host program's socket at `path` (a stand-in for a tmux server, which would run what
    it receives as the user, or an ssh agent): it records what reaches it, and answers each
    stream client `reply` when given. The list fills as clients come."""
    received: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, kind)
    server.bind(os.fspath(path))
    os.chmod(path, 0o777)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                if kind == socket.SOCK_DGRAM:
                    received.append(server.recv(100))
                    continue
                server.listen()
                connection, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                try:
                    received.append(connection.recv(100) or b"(connected)")
                    if reply is not None:
                        connection.sendall(reply)
                except OSError:
                    received.append(b"(connected)")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        stop.set()
        thread.join()
        server.close()
