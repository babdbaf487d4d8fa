"""The audit log: one JSON line per request, appended to a 0600 file.

It answers "who ran what, where, with which mounts, and how did it end" after the fact.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

logger = logging.getLogger(__name__)


class AuditMount(BaseModel):
    """A path the policy granted, and the identity the container was verified to mount."""

    model_config = ConfigDict(frozen=True)

    path: str
    read_only: bool
    device: int
    inode: int
    kind: str


class AuditNote(BaseModel):
    """What a request's handler learns about it, filled in as it goes: the optional tail
    of its `AuditRecord`. Fields that do not apply (e.g. `command` for a health check)
    stay null."""

    session: str | None = None
    command: str | None = None
    image: str | None = None
    mounts: list[AuditMount] | None = None
    network: bool | None = None
    stripped_env_keys: list[str] | None = None
    sandbox: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool | None = None
    error: str | None = None
    """Why the request was refused or the command failed to run."""


class _RequestFacts(BaseModel):
    time: str
    """When the request arrived (ISO 8601, UTC)."""
    peer_uid: int | None
    peer_gid: int | None
    peer_pid: int | None
    method: str
    path: str
    status: int
    """The HTTP status answered."""
    duration_s: float


# WHY the base order: pydantic lays fields out from the last base to the first, so the
# facts every request has lead each JSON line and the handler's note follows.
class AuditRecord(AuditNote, _RequestFacts):
    """One request: when, who, what was asked and answered, and what its handler noted."""

    model_config = ConfigDict(frozen=True)


def timestamp(unix_time: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if unix_time is None else unix_time, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditLog:
    """An append-only JSON-lines file, created 0600 (its parent 0700 when created here).

    WHY one os.write per record on an O_APPEND descriptor: each line lands whole even when
    another process appends to the same file, and a write to a local file is far cheaper
    than handing it to a thread.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self._fd: int | None = os.open(path, flags, 0o600)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot open the audit log {path}: {exc.strerror}; fix its permissions or set "
                "audit_log in the config to a writable file",
            ) from exc
        if os.fstat(self._fd).st_mode & 0o077:
            os.fchmod(self._fd, 0o600)

    def write(self, record: AuditRecord) -> None:
        if self._fd is None:
            return
        line = record.model_dump_json().encode("utf-8") + b"\n"
        try:
            os.write(self._fd, line)
        except OSError as exc:
            logger.error("cannot append to the audit log %s: %s", self.path, exc)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
