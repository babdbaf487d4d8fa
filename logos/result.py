"""The outcome of one command, as every runner reports it: at once, or, for a command that
went on as a job (`ExecOptions.background_after_s`), its output so far now and its end later.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass


@dataclass(frozen=True)
class JobStarted:
    """The command was still running at its background threshold: it goes on as job `id`.

    Its output from then on goes to the files (readable by later commands of the same
    runner; inside the sandbox for a sandbox's runner), None when no copy could be kept.
    """

    id: str
    stdout_file: str | None = None
    stderr_file: str | None = None


@dataclass(frozen=True)
class Result:
    """What happened to one command.

    Timeouts, signals and runner errors each have their own field so that nothing hides
    behind a sentinel exit code.
    """

    command: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    """The exit status when the command exited on its own; None when killed or not started."""
    signal: int | None = None
    """The signal that ended the command (e.g. 9 after a timeout's SIGKILL)."""
    timed_out: bool = False
    duration_s: float = 0.0
    stdout_dropped_bytes: int = 0
    """Bytes cut from the middle of stdout (see `stdout_file` for the saved copy)."""
    stderr_dropped_bytes: int = 0
    error: str | None = None
    """Why the runner could not run the command (it never started or the runner failed)."""
    oom_killed: bool = False
    """The kernel's out-of-memory killer ended it (known only where a runner can tell)."""
    stdout_file: str | None = None
    """Where the full stdout was saved when it was truncated (readable by a later command)."""
    stderr_file: str | None = None
    job: JobStarted | None = None
    """Set when the command went on as a job: then it has not ended, and stdout and stderr
    hold its output so far; its end comes later as a `JobEnd`."""
    blocked: tuple[str, ...] = ()
    """Connections the sandbox's egress proxy refused while the command ran, each
    "host:port: why" (a sandbox with allowed_hosts; the first few)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return _signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"


@dataclass(frozen=True)
class JobEnd:
    """How a job ended.

    `result` is its command's outcome over its whole life (exit code, signal, timeout,
    duration since it started, the files with its whole output); its stdout and stderr hold
    the output that came after the output so far its start showed (head and tail).
    """

    id: str
    result: Result


@dataclass(frozen=True)
class JobInfo:
    """A job that is still running, as a runner lists it."""

    id: str
    command: str
    running_s: float
    """Seconds since its command started."""
    stdout_file: str | None = None
    stderr_file: str | None = None
