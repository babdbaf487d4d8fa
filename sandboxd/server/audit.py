"""The audit log: one JSON line per request, appended to a 0600 file, rotated by size.

It answers "who ran what, where, with which mounts, and how did it end" after the fact.

WHY lines are cut: a request's command, paths and error come from the caller, up to the
1 MiB body limit, so a line that held them whole let every refused request add a mebibyte.
Each text keeps its head (4 KiB for the command and the error, 1 KiB for anything else:
paths, the session, the image) and, when cut, its full length as `<field>_bytes`; a list
(mounts, stripped env keys) keeps what fits in its budget and, when cut, its full length as
`<field>_count`. Sizes are counted as JSON bytes (a control character takes six), so no line
is longer than AUDIT_LINE_MAX_BYTES.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from sandboxd.egress.proxy import EgressEvent

logger = logging.getLogger(__name__)

COMMAND_HEAD_BYTES = 4096
"""The head of a long command kept in its line (as JSON bytes)."""
TEXT_HEAD_BYTES = 1024
"""The head kept of any other long text: a path, the session, the image, the method."""
_HEAD_BYTES = {"command": COMMAND_HEAD_BYTES, "error": 4096}
_LIST_BYTES = {"mounts": 8192, "stripped_env_keys": 2048}
_OTHER_LIST_BYTES = 2048
_SEPARATORS = (",", ":")
AUDIT_LINE_MAX_BYTES = 32 * 1024
"""No line is longer: the cuts above add up to about 24 KiB, field names and figures included."""


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
    allowed_hosts: list[str] | None = None
    stripped_env_keys: list[str] | None = None
    sandbox: str | None = None
    start_steps: dict[str, float] | None = None
    """Seconds each step of the sandbox's start took, when this request started it."""
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool | None = None
    job: str | None = None
    """The job the command became, or the job the request asked about."""
    error: str | None = None
    """Why the request was refused or the command failed to run."""


class EgressRecord(BaseModel):
    """One connection through a sandbox's egress proxy, allowed or denied."""

    model_config = ConfigDict(frozen=True)

    time: str
    event: str = "egress"
    session: str
    sandbox: str
    host: str
    port: int
    allowed: bool
    reason: str | None
    """Why it was denied or cut (null when it was allowed and ended normally)."""
    method: str
    address: str | None
    """The address the proxy connected to (null when denied before connecting)."""
    bytes_up: int
    bytes_down: int
    duration_s: float


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
    """An append-only JSON-lines file, created 0600 (its parent 0700 when created here),
    rotated before a line would take it past `max_bytes`: audit.log becomes audit.log.1,
    which becomes audit.log.2, and so on up to `backups` files (the oldest is deleted).

    WHY one os.write per record on an O_APPEND descriptor: each line lands whole even when
    another process appends to the same file, and a write to a local file is far cheaper
    than handing it to a thread.
    """

    def __init__(self, path: Path, *, max_bytes: int = 64 * 1024**2, backups: int = 3) -> None:
        if max_bytes < 2 * AUDIT_LINE_MAX_BYTES:
            raise ValueError(f"max_bytes must be at least {2 * AUDIT_LINE_MAX_BYTES}")
        self.path = path
        self._max_bytes = max_bytes
        self._backups = backups
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._fd: int | None = self._open(exclusive=False)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot open the audit log {path}: {exc.strerror}; fix its permissions or set "
                "audit_log in the config to a writable file",
            ) from exc

    def write_egress(self, session: str, sandbox: str, event: EgressEvent) -> None:
        """An egress proxy's connection (the backend calls it for each one)."""
        self.write(
            EgressRecord(
                time=timestamp(),
                session=session,
                sandbox=sandbox,
                host=event.host,
                port=event.port,
                allowed=event.allowed,
                reason=event.reason or None,
                method=event.method,
                address=event.address or None,
                bytes_up=event.bytes_up,
                bytes_down=event.bytes_down,
                duration_s=event.duration_s,
            )
        )

    def write(self, record: AuditRecord | EgressRecord) -> None:
        if self._fd is None:
            return
        line = audit_line(record)
        try:
            if os.fstat(self._fd).st_size + len(line) > self._max_bytes:
                self._rotate()
            os.write(self._fd, line)
        except OSError as exc:
            logger.error("cannot append to the audit log %s: %s", self.path, exc)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self, *, exclusive: bool) -> int:
        # WHY O_NOFOLLOW (and O_EXCL for a fresh log): a symlink planted at the log's name
        # must not make the daemon append to, or create, a file elsewhere.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags | (os.O_EXCL if exclusive else 0), 0o600)
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        return fd

    def _rotate(self) -> None:
        """Shift the backups up by one and start a fresh log; on failure keep appending."""
        assert self._fd is not None
        try:
            if self._backups == 0:
                os.unlink(self.path)
            else:
                for index in range(self._backups - 1, 0, -1):
                    older = self._backup(index)
                    if os.path.lexists(older):
                        os.replace(older, self._backup(index + 1))
                os.replace(self.path, self._backup(1))
            fresh = self._open(exclusive=True)
        except OSError as exc:
            logger.error(
                "cannot rotate the audit log %s (%s): appending past audit_log_max_bytes",
                self.path,
                exc,
            )
            return
        os.close(self._fd)
        self._fd = fresh

    def _backup(self, index: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{index}")


def audit_line(record: AuditRecord | EgressRecord) -> bytes:
    """The record as one JSON line of at most AUDIT_LINE_MAX_BYTES (see the module's note)."""
    fields = _bounded(record.model_dump())
    return json.dumps(fields, ensure_ascii=False, separators=_SEPARATORS).encode() + b"\n"


def _bounded(fields: Mapping[str, Any]) -> dict[str, Any]:
    bounded: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, str):
            head = _head(value, _HEAD_BYTES.get(name, TEXT_HEAD_BYTES))
            bounded[name] = head
            if len(head) < len(value):
                bounded[f"{name}_bytes"] = len(value.encode())
        elif isinstance(value, list):
            kept = _listed(value, _LIST_BYTES.get(name, _OTHER_LIST_BYTES))
            bounded[name] = kept
            if len(kept) < len(value):
                bounded[f"{name}_count"] = len(value)
        else:
            bounded[name] = value
    return bounded


def _listed(items: list[Any], budget: int) -> list[Any]:
    """The first items, each cut like a field, while their JSON fits in `budget` bytes."""
    kept: list[Any] = []
    used = 2  # the brackets
    for item in items:
        if isinstance(item, Mapping):
            item = _bounded(item)
        elif isinstance(item, str):
            item = _head(item, TEXT_HEAD_BYTES)
        used += len(json.dumps(item, ensure_ascii=False, separators=_SEPARATORS).encode()) + 1
        if used > budget:
            break
        kept.append(item)
    return kept


def _head(text: str, limit: int) -> str:
    """The longest head of `text` whose JSON form (escapes, UTF-8) takes at most `limit` bytes."""
    if len(text) * 6 <= limit:  # no character takes more than six bytes of JSON
        return text
    used = 0
    for index, char in enumerate(text):
        used += _json_bytes(char)
        if used > limit:
            return text[:index]
    return text


def _json_bytes(char: str) -> int:
    code = ord(char)
    if char in '"\\\n\r\t\b\f':
        return 2
    if code < 0x20:
        return 6
    if code < 0x80:
        return 1
    if code < 0x800:
        return 2
    return 3 if code < 0x10000 else 4
