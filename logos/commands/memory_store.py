"""Memory notes: short notes kept across runs, by key, for one user.

The model saves and reads them through commands the loop answers itself (remember, recall,
forget: saving one follows the run's approval mode, like any command); the user manages
them with `logos memory …` and a server's `/v1/memory`. New runs get them in their system
prompt (`memory_prompt`), within a bound, saying what was left out.

Keys are normalised (trimmed, lower-case), so "Build Command" and "build command " are one
note. The store is one JSON file, private to the user (0600 in a 0700 directory), replaced
atomically on every change under a lock, so the `logos` command and a server can write
it at the same time without losing a note or leaving half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from logos.errors import RecordFileError
from logos.jsonl import make_private_dir, replace_private_file, utc_now
from logos.options.declarations import DEFAULT_PROMPT_CHARS

_MAX_KEY_CHARS = 100
_MAX_NOTE_CHARS = 4000
MAX_NOTES = 500
"""Bounds that keep the file, and what a run may read of it, small."""
_NAMED_LEFT_OUT = 10
MEMORY_HEADING = "Notes saved in earlier runs"
"""How the notes' section of a system prompt starts (a resumed run recognises it)."""


class NoteError(ValueError):
    """A note that cannot be kept: the message says which bound it broke."""


@dataclass(frozen=True)
class Note:
    key: str
    text: str
    updated_at: str
    """UTC, ISO 8601."""


def normalize_key(key: str) -> str:
    """The key as stored: trimmed and lower-case; NoteError when empty, too long, or
    holding control characters."""
    normalized = key.strip().lower()
    if not normalized:
        raise NoteError("a note needs a key: a few words naming it")
    if len(normalized) > _MAX_KEY_CHARS:
        raise NoteError(f"a note's key is at most {_MAX_KEY_CHARS} characters")
    if any(ord(char) < 32 or ord(char) == 127 for char in normalized):
        raise NoteError("a note's key cannot hold control characters (newlines, tabs)")
    return normalized


class MemoryStore:
    """The notes file at `path`: read fresh on every call, so other writers are seen."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def notes(self) -> list[Note]:
        """Every note, most recently saved first."""
        return sorted(self._read().values(), key=lambda note: note.updated_at, reverse=True)

    def recall(self, key: str) -> Note | None:
        return self._read().get(normalize_key(key))

    def remember(self, key: str, text: str) -> Note:
        """Save `text` under `key`, replacing what was there."""
        normalized = normalize_key(key)
        text = text.strip()
        if not text:
            raise NoteError(f"the note {normalized!r} is empty: say what to remember")
        if len(text) > _MAX_NOTE_CHARS:
            raise NoteError(
                f"the note {normalized!r} has {len(text)} characters; at most "
                f"{_MAX_NOTE_CHARS} fit: keep what matters"
            )
        note = Note(normalized, text, utc_now())
        with self._locked():
            notes = self._read()
            if normalized not in notes and len(notes) >= MAX_NOTES:
                raise NoteError(
                    f"there are {len(notes)} notes already, the most kept: forget one first"
                )
            notes[normalized] = note
            self._write(notes)
        return note

    def forget(self, key: str) -> bool:
        """Remove the note; False when there was none."""
        normalized = normalize_key(key)
        with self._locked():
            notes = self._read()
            if notes.pop(normalized, None) is None:
                return False
            self._write(notes)
        return True

    def _read(self) -> dict[str, Note]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RecordFileError(
                f"cannot read the memory notes in {self.path} ({exc}): fix or delete the file"
            ) from None
        try:
            return {
                entry["key"]: Note(entry["key"], entry["text"], entry["updated_at"])
                for entry in data["notes"]
            }
        except (KeyError, TypeError):
            raise RecordFileError(
                f"{self.path} is not a memory notes file: fix or delete it"
            ) from None

    def _write(self, notes: dict[str, Note]) -> None:
        data = {"notes": [vars(note) for note in notes.values()]}
        replace_private_file(self.path, json.dumps(data, ensure_ascii=False, indent=1))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time, across processes (a lock file beside the notes)."""
        make_private_dir(self.path.parent)
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise RecordFileError(f"cannot lock {lock_path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def memory_prompt(notes: list[Note], max_chars: int = DEFAULT_PROMPT_CHARS) -> str:
    """The notes for a system prompt, most recent first, within `max_chars`; the notes that
    do not fit are counted and named, so the model knows to recall them."""
    if not notes:
        return ""
    lines = []
    used = 0
    left_out: list[str] = []
    for note in notes:
        line = f"- {note.key}: {note.text}"
        if left_out or used + len(line) + 1 > max_chars:
            left_out.append(note.key)
            continue
        lines.append(line)
        used += len(line) + 1
    text = f"{MEMORY_HEADING} (the most recent first):\n" + "\n".join(lines)
    if left_out:
        names = ", ".join(repr(key) for key in left_out[:_NAMED_LEFT_OUT])
        more = (
            f" and {len(left_out) - _NAMED_LEFT_OUT} more"
            if len(left_out) > _NAMED_LEFT_OUT
            else ""
        )
        text += (
            f"\n({len(left_out)} older notes are left out to keep this prompt short: "
            f"{names}{more}.)"
        )
    return text
