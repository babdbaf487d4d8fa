"""The daemon's jobs on disk, so that the next daemon answers them under the same ids.

One file per job under `<state_dir>/jobs/` (0600, replaced whole: a temporary file, fsync,
rename), written when the job is kept, when a kill is asked for and when its output is first
read after its end; removed when it is forgotten. What the job is doing is not kept here:
its sandbox's supervisor holds that (running, or its end), and the next daemon asks it.
The highest id given so far is kept beside them, so that an id is never given twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from logos.jsonl import replace_private_file
from sandboxd.backend import JobKey

_JOBS_DIR = "jobs"
"""Under the state directory."""
_LAST_ID_FILE = "last-id"
SUFFIX = ".json"

logger = logging.getLogger(__name__)


class JobRecord(BaseModel):
    """One caller's job, as the daemon that kept it knew it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    uid: int
    session: str
    command: str
    caller_id: str | None
    started_at: float
    timeout_s: float
    max_output_bytes: int
    stdout_file: str | None
    stderr_file: str | None
    sandbox: str
    """Its backend's key: the sandbox it runs in and its number there."""
    number: int
    kill_requested: bool = False
    read_at: float | None = None

    @property
    def key(self) -> JobKey:
        return JobKey(self.sandbox, self.number)


class JobStore:
    """Where one state directory's jobs are kept. Blocking: call it on a thread."""

    def __init__(self, state_dir: Path) -> None:
        self.directory = Path(state_dir) / _JOBS_DIR

    def save(self, record: JobRecord) -> None:
        replace_private_file(self.directory / f"{record.id}{SUFFIX}", record.model_dump_json())

    def save_last_id(self, last: int) -> None:
        replace_private_file(self.directory / _LAST_ID_FILE, str(last))

    def remove(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / f"{job_id}{SUFFIX}").unlink()

    def load(self) -> tuple[list[JobRecord], int]:
        """The jobs kept, and the highest id ever given (0: none). A record that cannot be
        read is logged and set aside (renamed `.unreadable`)."""
        try:
            entries = sorted(self.directory.iterdir())
        except FileNotFoundError:
            return [], 0
        records = []
        last = 0
        for entry in entries:
            if entry.name == _LAST_ID_FILE:
                with contextlib.suppress(OSError, ValueError):
                    last = max(last, int(entry.read_text().strip()))
                continue
            if entry.suffix != SUFFIX or entry.name.startswith("."):
                continue
            try:
                record = JobRecord.model_validate_json(entry.read_bytes())
            except (OSError, ValidationError) as exc:
                logger.warning("cannot read the job record %s (%s): set aside", entry, exc)
                with contextlib.suppress(OSError):
                    os.replace(entry, entry.with_suffix(".unreadable"))
                continue
            records.append(record)
            if record.id.isdigit():
                last = max(last, int(record.id))
        return records, last
