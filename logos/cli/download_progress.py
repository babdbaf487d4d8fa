"""How a model download shows on stderr (`logos.models.hf_hub.DownloadProgress`): a progress bar on
a terminal, one plain line as it starts and one as it ends elsewhere (a file, a pipe, `--json`
runs); and the question asked before the first download."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from logos.cli.render import make_console
from logos.models.hub_file import DownloadProgress, RemoteFile, megabytes


def download_progress(
    stream: TextIO, environ: Mapping[str, str], *, plain: bool = False
) -> DownloadProgress:
    """A bar when `stream` is a terminal (unless `plain`), else the plain lines."""
    if plain or not stream.isatty():
        return PlainDownloadProgress(stream)
    return TerminalDownloadProgress(make_console(stream, environ))


class PlainDownloadProgress:
    """Two lines per download: what, from where, how large (and where it resumes), then
    how large, how long and how fast; nothing in between, for logs."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._remote: RemoteFile | None = None
        self._started_at = 0.0
        self._received = 0

    def start(self, remote: RemoteFile, already: int) -> None:
        self._remote, self._started_at, self._received = remote, self._clock(), 0
        resuming = f", resuming at {megabytes(already)}" if already else ""
        self._write(
            f"downloading {remote.file} ({megabytes(remote.size)}) from {remote.endpoint}{resuming}"
        )

    def advance(self, nbytes: int) -> None:
        self._received += nbytes

    def end(self, completed: bool) -> None:
        if not completed or self._remote is None:
            return  # the error that stopped it says what happened
        seconds = max(self._clock() - self._started_at, 1e-3)
        self._write(
            f"downloaded {self._remote.file} ({megabytes(self._remote.size)}) in "
            f"{seconds:.1f} s ({megabytes(round(self._received / seconds))}/s)"
        )

    def _write(self, line: str) -> None:
        self._stream.write(f"logos: {line}\n")
        self._stream.flush()


class TerminalDownloadProgress:
    """A line saying what is downloaded from where, then a bar with the size, the speed and
    the time left, which stays on screen once the download ends."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self._task: TaskID | None = None

    def start(self, remote: RemoteFile, already: int) -> None:
        resuming = f", resuming at {megabytes(already)}" if already else ""
        self._console.print(
            Text(f"logos: downloading {remote.file} from {remote.endpoint}{resuming}")
        )
        self._task = self._progress.add_task(
            remote.file.filename, total=remote.size, completed=already
        )
        self._progress.start()

    def advance(self, nbytes: int) -> None:
        if self._task is not None:
            self._progress.advance(self._task, nbytes)

    def end(self, completed: bool) -> None:
        self._progress.stop()
        if self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None


def ask_to_download(remote: RemoteFile, cache_dir: Path, stdin: TextIO, stderr: TextIO) -> bool:
    """Ask on the terminal before a download: Enter or y goes ahead, n (or the end of the
    input) does not."""
    question = (
        f"logos: {remote.file} is {megabytes(remote.size)}; download it from "
        f"{remote.endpoint} into {cache_dir}? [Y/n] "
    )
    while True:
        stderr.write(question)
        stderr.flush()
        line = stdin.readline()
        if not line:
            stderr.write("\n")
            return False
        answer = line.strip().lower()
        if answer in ("", "y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        stderr.write("logos: answer y or n (Ctrl-C stops)\n")
