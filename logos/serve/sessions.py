"""SessionStore: conversations saved as they happen, one directory each.

    <root>/<session id>/session.jsonl             the trajectory (logos.records.trajectory)
    <root>/<session id>/runs/<run id>.jsonl       each run's event log (logos.serve.event_hub)

A run on a session continues its conversation; one session has at most one run at a time.
Ids are random hex: an id of any other shape is unknown, so no request names a path.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from logos.jsonl import make_private_dir
from logos.records.trajectory import Trajectory, load_trajectory

_ID = re.compile(r"[0-9a-f]{16}")
_TRAJECTORY_NAME = "session.jsonl"
_RUNS_DIR = "runs"
_TITLE_CHARS = 120
_HEAD_BYTES = 64 * 1024


def new_id() -> str:
    return secrets.token_hex(8)


def is_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


class UnknownSession(KeyError):
    """No session has that id."""


class SessionBusy(Exception):
    """A run is going on the session."""


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    """The start of its first prompt."""
    started_at: str
    model: str
    runner: str
    runs: int
    bytes: int


class SessionStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        make_private_dir(root)
        self._busy: set[str] = set()

    def directory(self, session_id: str) -> Path:
        """The session's directory; UnknownSession unless it exists."""
        if not is_id(session_id) or not (self.root / session_id / _TRAJECTORY_NAME).is_file():
            raise UnknownSession(session_id)
        return self.root / session_id

    def trajectory_path(self, session_id: str) -> Path:
        return self.root / session_id / _TRAJECTORY_NAME

    def runs_dir(self, session_id: str) -> Path:
        return self.root / session_id / _RUNS_DIR

    def create(self) -> str:
        """A new session directory, claimed for its first run (which writes its trajectory)."""
        session_id = new_id()
        make_private_dir(self.runs_dir(session_id))
        self._busy.add(session_id)
        return session_id

    def discard(self, session_id: str) -> None:
        """Remove a session whose first run could not start."""
        if is_id(session_id):
            shutil.rmtree(self.root / session_id, ignore_errors=True)

    def load(self, session_id: str) -> Trajectory:
        return load_trajectory(self.directory(session_id) / _TRAJECTORY_NAME)

    def claim(self, session_id: str) -> None:
        """Mark the session as having a run; SessionBusy when it has one already."""
        if session_id in self._busy:
            raise SessionBusy(session_id)
        self._busy.add(session_id)

    def release(self, session_id: str) -> None:
        self._busy.discard(session_id)

    def is_busy(self, session_id: str) -> bool:
        return session_id in self._busy

    def delete(self, session_id: str) -> None:
        directory = self.directory(session_id)
        if session_id in self._busy:
            raise SessionBusy(session_id)
        shutil.rmtree(directory)

    def list(self) -> list[SessionInfo]:
        """Every session, the most recently started first."""
        found = []
        for directory in self.root.iterdir():
            path = directory / _TRAJECTORY_NAME
            if is_id(directory.name) and path.is_file():
                info = _summary(directory.name, path)
                if info is not None:
                    found.append(info)
        return sorted(found, key=lambda info: info.started_at, reverse=True)

    def run_log(self, run_id: str) -> Path | None:
        """The event log of a run of any session, if there is one."""
        if not is_id(run_id):
            return None
        return next(iter(self.root.glob(f"*/{_RUNS_DIR}/{run_id}.jsonl")), None)


def _summary(session_id: str, path: Path) -> SessionInfo | None:
    """From the file's first lines (its header and first prompt), without reading it all."""
    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
    lines = head.split(b"\n")
    try:
        header = json.loads(lines[0])
        prompt = json.loads(lines[1]) if len(lines) > 1 and lines[1].strip() else {}
    except ValueError:
        return None
    runs_dir = path.parent / _RUNS_DIR
    runs = sum(1 for _ in runs_dir.glob("*.jsonl")) if runs_dir.is_dir() else 0
    title = str(prompt.get("content", ""))
    return SessionInfo(
        id=session_id,
        title=title[:_TITLE_CHARS] + ("…" if len(title) > _TITLE_CHARS else ""),
        started_at=str(header.get("started_at", "")),
        model=str(header.get("model", "")),
        runner=str(header.get("runner", "")),
        runs=runs,
        bytes=path.stat().st_size,
    )
