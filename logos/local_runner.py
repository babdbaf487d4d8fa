"""Run commands with local bash: no daemon, no isolation, but never a hung or leaked process."""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
import stat
import subprocess
import tempfile
import time
import weakref

import anyio
from anyio.abc import ByteReceiveStream, Process

from logos.capture import OutputCapture, UntrustedDirectory, open_private_dir, private_output_dir
from logos.group_reaper import KILL_GRACE_S, BackgroundGroups, group_alive, signal_group
from logos.options import NONINTERACTIVE_ENV, ExecOptions
from logos.result import Result
from logos.runner import Runner

DRAIN_GRACE_S = 0.25
"""After bash exits, how long to keep reading pipes a background process may hold open."""

SAVED_OUTPUT_MAX_AGE_S = 24 * 3600
"""Saved copies of cut outputs older than this are deleted when a runner first saves one."""

_READ_CHUNK = 64 * 1024


class LocalRunner(Runner):
    """Runs each command as `bash -c` in its own session and process group.

    Backgrounded processes (`server &`) outlive the command, as in a terminal, so that a
    later command can talk to them, but never the runner: `close()`/`aclose()` (or leaving
    `with`/`async with`) kills whatever is still running, and so does dropping the runner,
    the interpreter exiting, or the program dying by a signal (see `logos.group_reaper`).
    On timeout or cancellation the whole process group is killed: nothing survives it.
    """

    def __init__(self, shell: str = "bash") -> None:
        self._shell = shell
        self._background = BackgroundGroups()
        weakref.finalize(self, self._background.abandon)
        self._output_prefix = f"{os.getpid()}-{secrets.token_hex(3)}"
        self._counter = itertools.count(1)
        self._swept_saved_outputs = False

    async def run(self, command: str, options: ExecOptions) -> Result:
        started = time.monotonic()
        if "\0" in command:
            return Result(
                command=command,
                error="the command contains a NUL character, which no shell command can hold; "
                "write it as an escape instead (printf '\\0')",
            )
        workdir = options.resolved_workdir() or os.getcwd()
        if not os.path.isdir(workdir):
            return Result(
                command=command,
                error=f"working directory {workdir!r} does not exist or is not a directory",
            )
        save_dir = None
        if options.max_saved_output_bytes > 0:
            save_dir = private_output_dir(tempfile.gettempdir())
            if not self._swept_saved_outputs:
                self._swept_saved_outputs = True
                _remove_old_saved_outputs(save_dir, time.time() - SAVED_OUTPUT_MAX_AGE_S)
        stdout = self._capture(options, save_dir, "stdout")
        stderr = self._capture(options, save_dir, "stderr")
        try:
            process = await anyio.open_process(
                [self._shell, "-c", command],
                stdin=subprocess.DEVNULL,
                cwd=workdir,
                env=_command_env(options),
                start_new_session=True,
            )
        except OSError as exc:
            return Result(command=command, error=f"could not start {self._shell}: {exc}")

        self._background.forget_ended()
        self._background.started(process.pid)
        timed_out = False
        try:
            timed_out = await _supervise(process, stdout, stderr, options.timeout_s)
        except BaseException:
            # Cancelled (or failed): no result will point at the saved copies.
            stdout.discard()
            stderr.discard()
            raise
        finally:
            with anyio.CancelScope(shield=True):
                if timed_out or process.returncode is None:
                    await _kill_group(process)
                await process.aclose()
            self._background.settled(process.pid)

        out, err = stdout.finish(), stderr.finish()
        returncode = process.returncode
        return Result(
            command=command,
            stdout=out.text,
            stderr=err.text,
            exit_code=returncode if returncode is not None and returncode >= 0 else None,
            signal=-returncode if returncode is not None and returncode < 0 else None,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            stdout_dropped_bytes=out.dropped_bytes,
            stderr_dropped_bytes=err.dropped_bytes,
            stdout_file=out.saved_path,
            stderr_file=err.saved_path,
        )

    def close(self) -> None:
        """Kill what commands left running in the background (`server &`); blocks for up
        to the kill grace. The runner stays usable."""
        self._background.close()

    async def aclose(self) -> None:
        """`close()` for async callers (in a worker thread: the event loop keeps running)."""
        await anyio.to_thread.run_sync(self._background.close)

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _capture(self, options: ExecOptions, save_dir: str | None, stream: str) -> OutputCapture:
        """A capture that saves the full output to a file only if it overflows."""
        save_path = None
        if save_dir is not None:
            name = f"{self._output_prefix}-{next(self._counter):04d}-{stream}.txt"
            save_path = os.path.join(save_dir, name)
        return OutputCapture(options.max_output_bytes, save_path, options.max_saved_output_bytes)


def _remove_old_saved_outputs(save_dir: str, cutoff: float) -> None:
    """Delete our saved outputs last written before `cutoff` (epoch seconds).

    WHY: nothing else ever deletes them, and a copy can be 64 MiB. They are kept for a
    day rather than removed at `aclose()` because `logos exec` prints their paths for a
    caller to read after the runner is gone. The directory is checked and used through one
    descriptor, like the captures do, so a planted name cannot point the deletions elsewhere.
    """
    try:
        dir_fd = open_private_dir(save_dir)
    except UntrustedDirectory:
        return  # each capture that needs the directory says why it cannot save
    try:
        with contextlib.suppress(OSError), os.scandir(dir_fd) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                        os.unlink(entry.name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _command_env(options: ExecOptions) -> dict[str, str]:
    env = dict(os.environ) if options.inherit_env else {}
    env.update(NONINTERACTIVE_ENV)
    env.update(options.env)
    return env


async def _supervise(
    process: Process, stdout: OutputCapture, stderr: OutputCapture, timeout_s: float
) -> bool:
    """Pump both pipes until bash exits or the timeout hits; True when it timed out.

    WHY a drain grace: a backgrounded grandchild (`sleep 1000 & echo hi`) keeps the pipes
    open after bash exits; waiting for EOF would hang until the timeout.
    """
    assert process.stdout is not None and process.stderr is not None
    timed_out = False
    async with anyio.create_task_group() as pumps:
        drained = [anyio.Event(), anyio.Event()]
        pumps.start_soon(_pump, process.stdout, stdout, drained[0])
        pumps.start_soon(_pump, process.stderr, stderr, drained[1])
        with anyio.move_on_after(timeout_s) as deadline:
            await process.wait()
        if deadline.cancelled_caught:
            timed_out = True
            await _kill_group(process)
        with anyio.move_on_after(DRAIN_GRACE_S):
            for event in drained:
                await event.wait()
        pumps.cancel_scope.cancel()
    return timed_out


async def _pump(stream: ByteReceiveStream, capture: OutputCapture, done: anyio.Event) -> None:
    try:
        while True:
            capture.write(await stream.receive(_READ_CHUNK))
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


async def _kill_group(process: Process) -> None:
    """SIGTERM the process group, SIGKILL it after a grace; returns once bash is reaped."""
    pgid = process.pid
    signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(KILL_GRACE_S):
        await process.wait()
        while group_alive(pgid):
            await anyio.sleep(0.02)
    signal_group(pgid, signal.SIGKILL)
    await process.wait()
