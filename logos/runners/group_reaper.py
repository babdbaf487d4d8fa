"""Process groups that commands left running, and who kills them when their runner is gone.

A command's background process (`server &`) may outlive the command, for the runner's later
commands, but never the runner, nor the program that made it. They die when the runner is
closed; when it is garbage-collected or the interpreter exits without closing it (a finalizer);
and when the program dies with no hook run at all (SIGKILL): a watchdog process reads a pipe
whose write end only the program holds, so end of file means the program is gone, and then
it kills the groups it was told of.

Standard library only: the watchdog is this file run as a script (`python -I -S`), which
starts in milliseconds whatever the program itself imports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from typing import BinaryIO

KILL_GRACE_S = 2.0
"""Between SIGTERM and SIGKILL when a command or what it left behind is killed."""

_POLL_S = 0.02


class BackgroundGroups:
    """The process groups a runner's commands started, kept while anything is left in them.

    The watchdog is started only when a command first leaves something behind (or goes on
    as a job): a runner whose commands all finish cleanly costs no process. Thread-safe: a
    job's end is settled from the thread that watches it.
    """

    def __init__(self) -> None:
        self._pgids: set[int] = set()
        self._watchdog: Watchdog | None = None
        self._owner = os.getpid()
        self._lock = threading.RLock()

    @property
    def pgids(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._pgids)

    def started(self, pgid: int) -> None:
        """A command started as the leader of its own session and group `pgid`."""
        with self._lock:
            self._pgids.add(pgid)
            if self._watchdog is not None:
                self._watchdog.watch(pgid)

    def detached(self, pgid: int) -> None:
        """The command goes on without its caller (a job): the watchdog must know its group
        before the caller returns, in case the program dies meanwhile."""
        with self._lock:
            assert pgid in self._pgids, "a group is started before it goes on as a job"
            self._ensure_watchdog()

    def settled(self, pgid: int) -> None:
        """The command's shell is gone: keep its group only if something is left in it."""
        with self._lock:
            if group_alive(pgid):
                self._ensure_watchdog()
            else:
                self._forget(pgid)

    def forget_ended(self) -> None:
        """Drop groups with no process left.

        WHY: the id of an ended group may be given to an unrelated process group, which
        would then be killed; a group that still has a zombie keeps its id reserved.
        """
        with self._lock:
            for pgid in list(self._pgids):
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    self._forget(pgid)
                except PermissionError:
                    pass

    def close(self) -> None:
        """Kill every group now (SIGTERM, then SIGKILL after the grace); blocks until done."""
        _terminate_groups(self.pgids)
        with self._lock:
            for pgid in list(self._pgids):
                self._forget(pgid)
            if self._watchdog is not None:
                self._watchdog.release()
                self._watchdog.wait(timeout_s=KILL_GRACE_S)
                self._watchdog = None

    def abandon(self) -> None:
        """The runner is gone unclosed (collected, or the interpreter is exiting).

        The watchdog kills the groups, grace included, without making the program wait.
        """
        if os.getpid() != self._owner:
            return  # a forked child's copy: the groups are its parent's
        with self._lock:
            if self._watchdog is not None:
                self._watchdog.release()
                self._watchdog = None
            else:  # it could not be started: nobody is left to wait the grace
                for pgid in self._pgids:
                    if group_alive(pgid, leading_a_session=True):
                        signal_group(pgid, signal.SIGKILL)
            self._pgids.clear()

    def _forget(self, pgid: int) -> None:
        self._pgids.discard(pgid)
        if self._watchdog is not None:
            self._watchdog.forget(pgid)

    def _ensure_watchdog(self) -> None:
        if self._watchdog is not None and self._watchdog.alive:
            return
        try:
            self._watchdog = Watchdog.start(self._pgids)
        except OSError:
            self._watchdog = None  # abandon() then kills the groups itself


class Watchdog:
    """A process that kills the groups it was told of once this program is gone.

    Its stdin is the read end of a pipe; the write end is this process's alone (not
    inheritable, so no command holds it), and closes however this process ends.
    """

    def __init__(self, process: subprocess.Popen[bytes], pipe: int) -> None:
        self._process = process
        self._pipe: int | None = pipe

    @classmethod
    def start(cls, pgids: Iterable[int]) -> Watchdog:
        """Start one, watching `pgids`; OSError when it cannot be started."""
        read_end, write_end = os.pipe()
        try:
            process = subprocess.Popen(
                [sys.executable or "python3", "-I", "-S", os.path.abspath(__file__)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                # WHY: a Ctrl-C or a hangup aimed at the program's group must not end the
                # watchdog before the program, whose groups it is there to kill.
                start_new_session=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        watchdog = cls(process, write_end)
        for pgid in pgids:
            watchdog.watch(pgid)
        return watchdog

    @property
    def alive(self) -> bool:
        return self._pipe is not None and self._process.poll() is None

    def watch(self, pgid: int) -> None:
        self._tell(b"+%d\n" % pgid)

    def forget(self, pgid: int) -> None:
        self._tell(b"-%d\n" % pgid)

    def release(self) -> None:
        """Close our end of the pipe: the watchdog kills what it still watches, then exits."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None

    def wait(self, timeout_s: float) -> bool:
        """Whether the watchdog exited within `timeout_s`."""
        try:
            self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _tell(self, line: bytes) -> None:
        if self._pipe is None:
            return
        try:
            os.write(self._pipe, line)
        except OSError:  # it died: the next command left behind starts another
            self.release()


def _terminate_groups(pgids: Iterable[int], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM each group that is still one a runner started, SIGKILL what is left after
    `grace_s`. Blocks until then."""
    ours = [pgid for pgid in pgids if group_alive(pgid, leading_a_session=True)]
    for pgid in ours:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(map(group_alive, ours)):
        time.sleep(_POLL_S)
    for pgid in ours:
        if group_alive(pgid, leading_a_session=True):
            signal_group(pgid, signal.SIGKILL)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int, *, leading_a_session: bool = False) -> bool:
    """Whether a live (non-zombie) process remains in the group; with `leading_a_session`,
    only if the group is its own session's, as every group a runner starts is.

    WHY not just `killpg(pgid, 0)`: it also succeeds for zombies that an init which does
    not reap promptly leaves behind, which would turn every kill into a full grace wait.
    WHY the session: an id whose group has ended may be reused by an unrelated group, which
    is then almost never a session of its own.
    """
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp session ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 4 or int(fields[2]) != pgid or fields[0] == b"Z":
            continue
        if not leading_a_session or int(fields[3]) == pgid:
            return True
    return False


def watch(commands: BinaryIO) -> None:
    """The watchdog: note groups (`+pgid`) and forget them (`-pgid`) until end of file,
    which means the program is gone; then kill what is still noted."""
    pgids: set[int] = set()
    for line in commands:
        pgid = int(line[1:])
        if line.startswith(b"+"):
            pgids.add(pgid)
        else:
            pgids.discard(pgid)
    _terminate_groups(pgids)


if __name__ == "__main__":
    watch(sys.stdin.buffer)
