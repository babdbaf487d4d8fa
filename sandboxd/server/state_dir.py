"""The daemon's state directory: one daemon at a time uses it, and it is known by an id.

WHY one at a time: what a daemon keeps there (its sandboxes' records and secrets, its jobs,
its lost sessions) is what the next daemon on it takes over; two at once would each take
over the other's. A lock file (`daemon.lock`, flock held for the daemon's life) makes that a
race-free question, as the socket's lock does for the socket (sandboxd.server.daemon). The
id (`id`, made once) labels the sandboxes kept there (sandboxd.docker.ownership.LABEL_STATE).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from logos.errors import RecordFileError
from logos.jsonl import replace_private_file
from sandboxd.paths import take_pid_lock

_LOCK_FILE = "daemon.lock"
ID_FILE = "id"


class StateDirError(Exception):
    """The state directory cannot be used; the message says why and what to do."""


@dataclass
class StateDir:
    path: Path
    id: str
    lock_fd: int

    def release(self) -> None:
        os.close(self.lock_fd)


def claim_state_dir(path: Path) -> StateDir:
    """Lock `path` for this daemon and read (or make) its id; StateDirError otherwise."""
    lock = path / _LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StateDirError(
            f"cannot create the lock file {lock}: {exc.strerror or exc}; set state_dir in the "
            "config to a directory you own"
        ) from None
    try:
        take_pid_lock(
            fd,
            lock,
            StateDirError,
            held=lambda pid: (
                f"another sandboxd uses the state directory {path}{pid}: stop it "
                "first, or give this one a state_dir of its own in its config"
            ),
        )
        return StateDir(path, _state_id(path), fd)
    except BaseException:
        os.close(fd)
        raise


def _state_id(path: Path) -> str:
    """The directory's id, made the first time (16 hex digits)."""
    id_file = path / ID_FILE
    with contextlib.suppress(FileNotFoundError):
        known = id_file.read_text().strip()
        if len(known) == 16 and all(c in "0123456789abcdef" for c in known):
            return known
    made = secrets.token_hex(8)
    try:
        replace_private_file(id_file, made)
    except (OSError, RecordFileError) as exc:
        raise StateDirError(
            f"cannot write {id_file}: {exc}; make the state directory writable"
        ) from None
    return made
