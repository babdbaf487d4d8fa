"""Run commands with local bash: no daemon, no isolation, but never a hung or leaked process."""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import stat
import subprocess
import tempfile
import threading
import time
import weakref

import anyio

from logos.options import NONINTERACTIVE_ENV, ExecOptions
from logos.result import JobEnd, JobInfo, JobStarted, Result
from logos.runners.base import Runner
from logos.runners.capture import (
    OutputCapture,
    UntrustedDirectory,
    open_private_dir,
    private_output_dir,
)
from logos.runners.group_reaper import BackgroundGroups
from logos.runners.live import current_live_output
from logos.runners.process import LocalProcess, NotKept

_SAVED_OUTPUT_MAX_AGE_S = 24 * 3600
"""Saved copies of cut outputs older than this are deleted when a runner first saves one."""
_DEFAULT_MAX_JOBS = 16
"""Jobs a runner keeps at once: running, or ended with their end not yet taken."""
_JOIN_S = 1.0
"""After the kill grace, how long `close()` waits for each job's end to be recorded."""


class LocalRunner(Runner):
    """Runs each command as `bash -c` in its own session and process group.

    Backgrounded processes (`server &`) outlive the command, as in a terminal, so that a
    later command can talk to them, but never the runner: `close()`/`aclose()` (or leaving
    `with`/`async with`) kills whatever is still running, and so does dropping the runner,
    the interpreter exiting, or the program dying by a signal (see `logos.runners.group_reaper`).
    On timeout or cancellation the whole process group is killed: nothing survives it.

    It keeps jobs (`logos.runners.job_runner.JobRunner`): with `ExecOptions.background_after_s`, a
    command still running then goes on in its group, its output flowing into its saved copies, until
    it ends, times out, is killed, or the runner closes. It keeps at most `max_jobs` at once.
    """

    def __init__(self, shell: str = "bash", *, max_jobs: int = _DEFAULT_MAX_JOBS) -> None:
        if max_jobs < 1:
            raise ValueError(f"max_jobs must be at least 1, got {max_jobs}")
        self._shell = shell
        self._background = BackgroundGroups()
        weakref.finalize(self, self._background.abandon)
        self._jobs = _Jobs(max_jobs)
        self._output_prefix = f"{os.getpid()}-{secrets.token_hex(3)}"
        self._counter = itertools.count(1)
        self._swept_saved_outputs = False

    async def run(self, command: str, options: ExecOptions) -> Result:
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
                _remove_old_saved_outputs(save_dir, time.time() - _SAVED_OUTPUT_MAX_AGE_S)
        stdout = self._capture(options, save_dir, "stdout")
        stderr = self._capture(options, save_dir, "stderr")
        try:
            # WHY here and not in a worker thread: starting is as quick as anyio's own
            # open_process, which also forks on the event loop's thread, and a thread hop
            # would leave a window where a cancel loses the process.
            started = time.monotonic()  # WHY before: the command runs once fork returns
            process = subprocess.Popen(  # noqa: ASYNC220
                [self._shell, "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=_command_env(options),
                start_new_session=True,
            )
        except OSError as exc:
            return Result(command=command, error=f"could not start {self._shell}: {exc}")

        self._background.forget_ended()
        self._background.started(process.pid)
        background, jobs = self._background, self._jobs
        live = current_live_output()
        watched = LocalProcess(
            process,
            stdout,
            stderr,
            command=command,
            started=started,
            timeout_s=options.timeout_s,
            background_at_s=options.background_at_s(),
            on_background=lambda job: jobs.admit(job, background),
            on_end=lambda ended: background.settled(ended.pid),
            on_output=None if live is None else live.write,
        )
        try:
            await watched.settled.wait()
        except BaseException:
            # Cancelled: nothing it started survives it, and no result will point at its
            # saved copies nor name its job.
            watched.stop(discard=True)
            jobs.drop(watched)
            with anyio.CancelScope(shield=True):
                await watched.ended.wait()
            raise
        if watched.background is not None:
            shown = watched.background
            return Result(
                command=command,
                stdout=shown.stdout.text,
                stderr=shown.stderr.text,
                duration_s=shown.duration_s,
                stdout_dropped_bytes=shown.stdout.dropped_bytes,
                stderr_dropped_bytes=shown.stderr.dropped_bytes,
                job=JobStarted(shown.job_id, shown.stdout.saved_path, shown.stderr.saved_path),
            )
        return watched.result()

    async def list_jobs(self) -> list[JobInfo]:
        return self._jobs.running()

    async def wait_job(self, job_id: str, timeout_s: float) -> JobEnd | None:
        job = self._jobs.get(job_id)
        with anyio.move_on_after(timeout_s):
            await job.ended.wait()
        return self._jobs.take(job_id) if job.ended.is_set() else None

    async def kill_job(self, job_id: str) -> JobEnd:
        job = self._jobs.get(job_id)
        job.stop()
        await job.ended.wait()
        return self._jobs.take(job_id)

    async def ended_jobs(self) -> list[JobEnd]:
        return self._jobs.take_ended()

    def close(self) -> None:
        """Kill what commands left running in the background (`server &`) and the jobs;
        blocks for up to the kill grace. The runner stays usable."""
        self._background.close()
        for job in self._jobs.clear():
            job.join(_JOIN_S)

    async def aclose(self) -> None:
        """`close()` for async callers (in a worker thread: the event loop keeps running)."""
        await anyio.to_thread.run_sync(self.close)

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _capture(self, options: ExecOptions, save_dir: str | None, stream: str) -> OutputCapture:
        """A capture that saves the full output to a file only if it overflows (or when the
        command goes on as a job)."""
        save_path = None
        if save_dir is not None:
            name = f"{self._output_prefix}-{next(self._counter):04d}-{stream}.txt"
            save_path = os.path.join(save_dir, name)
        return OutputCapture(options.max_output_bytes, save_path, options.max_saved_output_bytes)


class _Jobs:
    """A runner's jobs by id, until their end is taken; shared with the watching threads."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._jobs: dict[str, LocalProcess] = {}

    def admit(self, job: LocalProcess, groups: BackgroundGroups) -> str:
        """The id of a command that goes on as a job; NotKept when `most` are kept already."""
        with self._lock:
            if len(self._jobs) >= self._most:
                raise NotKept(
                    f"the command was still running at its background threshold, and this "
                    f"runner already keeps {self._most} jobs, its most: it was stopped. Wait "
                    "for a job or stop one (`jobs` lists them), then run it again"
                )
            job_id = str(next(self._ids))
            self._jobs[job_id] = job
        groups.detached(job.pid)
        return job_id

    def get(self, job_id: str) -> LocalProcess:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise LookupError(f"there is no job {job_id} (or its end was reported already)")
        return job

    def take(self, job_id: str) -> JobEnd:
        """The end of an ended job, handed out once."""
        with self._lock:
            job = self._jobs.pop(job_id, None)
        if job is None:
            raise LookupError(f"job {job_id}'s end was reported already")
        return JobEnd(job_id, job.result())

    def take_ended(self) -> list[JobEnd]:
        with self._lock:
            ended = [job_id for job_id, job in self._jobs.items() if job.ended.is_set()]
        return [self.take(job_id) for job_id in ended]

    def running(self) -> list[JobInfo]:
        with self._lock:
            jobs = list(self._jobs.items())
        now = time.monotonic()
        return [
            JobInfo(
                id=job_id,
                command=job.command,
                running_s=now - job.started,
                stdout_file=job.background.stdout.saved_path if job.background else None,
                stderr_file=job.background.stderr.saved_path if job.background else None,
            )
            for job_id, job in jobs
            if not job.ended.is_set()
        ]

    def drop(self, job: LocalProcess) -> None:
        """Forget `job` if it was admitted (its caller was cancelled as it went on)."""
        with self._lock:
            for job_id in [i for i, kept in self._jobs.items() if kept is job]:
                del self._jobs[job_id]

    def clear(self) -> list[LocalProcess]:
        with self._lock:
            jobs = list(self._jobs.values())
            self._jobs.clear()
        return jobs


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
