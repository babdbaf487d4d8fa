"""The processes a test starts: running programs and servers in the background (and
nothing left of them after the test), sending them signals, watching them from a thread,
finding them in /proc to prove that nothing survived, and stopping them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import anyio

PRINT_TIMEOUT_S = 90.0


class Closable(Protocol):
    """A client of a server (an httpx.Client…), closed before the server stops."""

    def close(self) -> None: ...


def open_fds(pid: int | str = "self") -> set[int]:
    """The file descriptors a process (this one by default) holds now."""
    return {int(name) for name in os.listdir(f"/proc/{pid}/fd")}


def processes_matching(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


async def until_gone(marker: str) -> None:
    """Wait, without blocking the event loop, until no live process's command line contains
    `marker` (a killed command's); the caller bounds the wait (anyio.fail_after)."""
    while processes_matching(marker):
        await anyio.sleep(0.05)


class Repeating:
    """`step()` over and over in a thread of its own, `pause` seconds apart, while a `with`
    block runs: a probe that watches what the test does to a server."""

    def __init__(self, pause: float) -> None:
        self._pause = pause
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._repeat)

    def step(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _repeat(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self._pause)


async def killed_after_printing(script: str, *args: str, lines: int) -> list[str]:
    """Run `script` with this Python until it printed `lines` lines (within
    PRINT_TIMEOUT_S), then SIGKILL it (no chance to clean up, as a crashed program); the
    words it printed."""
    child = await anyio.open_process([sys.executable, "-c", script, *args])
    try:
        assert child.stdout is not None
        printed = b""
        with anyio.fail_after(PRINT_TIMEOUT_S):
            while printed.count(b"\n") < lines:
                printed += await child.stdout.receive()
    finally:
        child.kill()
        await child.wait()
    return printed.decode().split()


def wait_for(condition: Callable[[], object], timeout: float = 60.0) -> bool:
    """Whether `condition` came true within `timeout` seconds (polled every 0.05 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def run_module(
    module: str, *args: str, cwd: Path, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS` to its end, stdin closed, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=None if env is None else dict(env),
    )


@contextlib.contextmanager
def running(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`argv` started in the background, stdin closed, stdout and stderr piped as text; killed
    if it still runs when the block ends, so that a failing test leaves nothing behind."""
    with subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        cwd=cwd,
        text=True,
    ) as proc:  # WHY `with`: it closes the pipes and waits for the process at the end
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def interrupt(
    proc: subprocess.Popen[str], *signals: int, timeout: float, apart: float = 0.3
) -> tuple[str, str]:
    """Send `signals` (`apart` seconds apart), as a user pressing Ctrl-C does, and wait for the
    program to end: what it wrote to stdout and to stderr."""
    for number, sig in enumerate(signals):
        if number:
            time.sleep(apart)
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=timeout)
    return stdout, stderr


def start_logged(
    argv: Sequence[str], *, log: Path, cwd: Path, env: Mapping[str, str], **popen: Any
) -> subprocess.Popen[bytes]:
    """A server started in the background, stdin closed, its stdout and stderr going to
    `log` (read with `log_text`); `popen` are more `subprocess.Popen` options."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            **popen,
        )


def wait_started(
    proc: subprocess.Popen[bytes],
    what: str,
    output: Callable[[], str],
    ready: Callable[[], bool],
    timeout: float,
) -> None:
    """Wait until `ready()` says a server the test started serves; the test fails with the
    server's output if it exits first, and the server is killed if it takes over `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}:\n{output()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{what} did not start within {timeout} s:\n{output()}")


def log_text(log: Path) -> str:
    """What a server the test started wrote to its log so far ("" before it wrote any)."""
    return log.read_text(errors="replace") if log.exists() else ""


def stop_server(
    proc: subprocess.Popen[bytes],
    what: str,
    output: Callable[[], str],
    sig: int,
    timeout: float,
    clients: Iterable[Closable] = (),
) -> int:
    """Close the test's `clients` of a server it started, send `sig` and wait for the exit
    status; one that does not stop in time is killed, and the test fails with its output."""
    for client in clients:
        client.close()
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{what} did not stop within {timeout} s:\n{output()}") from None
