"""One local command's process, watched by a thread of its own from its start to its end.

The thread reads both pipes into their captures, enforces the timeout (SIGTERM to the whole
process group, SIGKILL after a grace) and, at the background threshold, hands the command to
its runner as a job. WHY a thread rather than the event loop: a job must go on being read
(its output flows into its saved copy), timed and reaped after `run()` has returned, even
once the event loop that started it is gone (`execute_blocks_sync` starts one per call).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from logos.result import Result
from logos.runners.capture import CapturedOutput, OutputCapture, read_process_output
from logos.runners.group_reaper import KILL_GRACE_S, group_alive, signal_group
from logos.runners.live import Stream

_DRAIN_GRACE_S = 0.25
"""After bash exits, how long to keep reading pipes a background process may hold open."""
_POLL_S = 0.02
"""The longest sleep while nothing can say when it should end (no pidfd, or a group being
killed is checked for members)."""


class Flag:
    """Set once, from any thread; awaited from any event loop, or waited for blocking.

    WHY a pipe per waiting task: the thread that sets it has no event loop to call into, and
    an event loop can wait for a descriptor (one task per descriptor).
    """

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._pipes: set[int] = set()

    def is_set(self) -> bool:
        return self._set.is_set()

    def set(self) -> None:
        with self._lock:
            if self._set.is_set():
                return
            self._set.set()
            for write_end in self._pipes:
                with contextlib.suppress(OSError):
                    os.write(write_end, b"!")

    async def wait(self) -> None:
        if self._set.is_set():
            return
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                if self._set.is_set():
                    return
                self._pipes.add(write_end)
            await anyio.wait_readable(read_end)
        finally:
            with self._lock:  # WHY under the lock: set() never writes to a closed number
                self._pipes.discard(write_end)
                os.close(write_end)
            os.close(read_end)

    def wait_blocking(self, timeout_s: float) -> bool:
        return self._set.wait(timeout_s)


class NotKept(Exception):
    """The runner keeps no more jobs: the command is stopped, its error says why."""


@dataclass(frozen=True)
class Backgrounded:
    """The command went on as a job: its id, and its output until then."""

    job_id: str
    stdout: CapturedOutput
    stderr: CapturedOutput
    duration_s: float


OnBackground = Callable[["LocalProcess"], str]
"""Called on the watching thread at the background threshold: the job id the runner gives the
command; raises NotKept when the runner will not keep it."""


class LocalProcess:
    """A started `bash -c` (leading its own session and group) and the thread watching it.

    `settled` is set when the command ended or went on as a job (`background`), `ended` when
    it ended; then `result()` says how.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        stdout: OutputCapture,
        stderr: OutputCapture,
        *,
        command: str,
        started: float,
        timeout_s: float,
        background_at_s: float | None,
        on_background: OnBackground,
        on_end: Callable[[LocalProcess], None],
        on_output: Callable[[Stream, bytes], None] | None = None,
    ) -> None:
        self.command = command
        self.pid = process.pid
        self.started = started
        """When it was started (`time.monotonic()` before the fork): its duration, deadline
        and background threshold count from there."""
        self.settled = Flag()
        self.ended = Flag()
        self.background: Backgrounded | None = None
        self._process = process
        self._stdout = stdout
        self._stderr = stderr
        self._deadline = self.started + timeout_s
        self._background_at = None if background_at_s is None else self.started + background_at_s
        self._on_background = on_background
        self._on_end = on_end
        self._on_output = on_output
        self._lock = threading.Lock()
        self._stop_asked = False
        self._stop_error: str | None = None
        self._discard = False
        self._timed_out = False
        self._watch_failure: str | None = None
        self._term_sent_at: float | None = None
        self._killed = False
        self._outputs: tuple[CapturedOutput, CapturedOutput] | None = None
        self._duration_s = 0.0
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(
            target=self._watch, name=f"logos-command-{self.pid}", daemon=True
        )
        self._thread.start()

    def stop(self, error: str | None = None, *, discard: bool = False) -> None:
        """Stop the command now: SIGTERM its group, SIGKILL after the grace.

        `error`: what its result's error says (None: the signal says it all); `discard`:
        nobody will read its result, so its saved copies are deleted.
        """
        with self._lock:
            if self._stop_asked or self.ended.is_set():
                return
            self._stop_asked = True
            self._stop_error = error
            self._discard = discard
            os.write(self._wake_write, b"!")

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def result(self) -> Result:
        """How the command ended (after `ended`): since its job started, if it went on as one."""
        assert self._outputs is not None, "result() waits for `ended`"
        out, err = self._outputs
        returncode = self._process.returncode
        return Result(
            command=self.command,
            stdout=out.text,
            stderr=err.text,
            exit_code=returncode if returncode is not None and returncode >= 0 else None,
            signal=-returncode if returncode is not None and returncode < 0 else None,
            timed_out=self._timed_out,
            duration_s=self._duration_s,
            stdout_dropped_bytes=out.dropped_bytes,
            stderr_dropped_bytes=err.dropped_bytes,
            error=self._watch_failure or self._stop_error,
            stdout_file=out.saved_path,
            stderr_file=err.saved_path,
        )

    # The watching thread --------------------------------------------------------------------

    def _watch(self) -> None:
        try:
            self._pump()
        except Exception as exc:  # a bug here must not leave a caller waiting forever
            self._watch_failure = f"logos failed to watch the command: {type(exc).__name__}: {exc}"
            signal_group(self.pid, signal.SIGKILL)
        finally:
            self._end()

    def _end(self) -> None:
        self._process.wait()
        self._duration_s = time.monotonic() - self.started
        if self._discard:
            self._stdout.discard()
            self._stderr.discard()
        shown = self.background
        self._outputs = (
            self._stdout.finish(skip=shown.stdout.total_bytes if shown else 0),
            self._stderr.finish(skip=shown.stderr.total_bytes if shown else 0),
        )
        try:
            # WHY before the flags: once its caller hears of the end, the runner must
            # already know what the command left running (the watchdog, for `server &`).
            self._on_end(self)
        finally:
            with self._lock:
                os.close(self._wake_read)
                os.close(self._wake_write)
                self.ended.set()
            self.settled.set()

    def _pump(self) -> None:
        """Read both pipes until bash has exited and they are drained (see
        `read_process_output`), tending the command on each turn."""
        read_process_output(
            self._process,
            self._stdout,
            self._stderr,
            self._tend,
            drain_s=_DRAIN_GRACE_S,
            poll_s=_POLL_S,
            wake_fd=self._wake_read,
            on_chunk=self._on_output,
        )

    def _tend(self, now: float, exited: bool) -> float | None:
        """Stop the command when its deadline passes or a stop is asked, hand it over at its
        threshold; returns how long the read loop may wait (None once done with it)."""
        if (
            not exited
            and self._term_sent_at is None
            and (self._stop_asked or now >= self._deadline)
        ):
            self._timed_out = not self._stop_asked
            signal_group(self.pid, signal.SIGTERM)
            self._term_sent_at = now
        elif self._term_sent_at is not None and not self._killed:
            # What the stopped command started goes too, within the grace.
            if now >= self._term_sent_at + KILL_GRACE_S or (exited and not group_alive(self.pid)):
                signal_group(self.pid, signal.SIGKILL)
                self._killed = True  # then the loop drains what the group wrote last
        elif not exited and self._term_sent_at is None and self._due_for_background(now):
            self._go_background(now)
            return 0.0
        if exited and (self._term_sent_at is None or self._killed):
            return None
        if self._term_sent_at is not None:
            return _POLL_S
        wakes = [self._deadline]
        if self._background_at is not None and self.background is None:
            wakes.append(self._background_at)
        return max(min(wakes) - now, 0.0)

    def _due_for_background(self, now: float) -> bool:
        return (
            self._background_at is not None
            and self.background is None
            and not self._stop_asked
            and now >= self._background_at
        )

    def _go_background(self, now: float) -> None:
        try:
            job_id = self._on_background(self)
        except NotKept as refusal:
            self.stop(str(refusal))
            return
        self._stdout.save_whole()
        self._stderr.save_whole()
        self.background = Backgrounded(
            job_id, self._stdout.snapshot(), self._stderr.snapshot(), now - self.started
        )
        self.settled.set()
