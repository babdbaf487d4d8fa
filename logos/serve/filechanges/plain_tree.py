"""Snapshots of a directory that is no git work tree: each file's size, time and, for text
files within the bounds, its content (kept once, by digest, in a private store); compared
snapshot to snapshot, diffed with difflib.

WHY by directory descriptors: a command may swap a directory for a symlink to anywhere
while the server walks; each step opens the next name relative to the directory already
open, never following a link, and reads only regular files (a FIFO would block the walk).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from logos.serve.filechanges.limits import ChangeLimits, size_text
from logos.serve.filechanges.wire import ChangedFile, ChangeStatus, FileDiff

_SKIPPED_DIRECTORIES = frozenset({".git"})
"""Never walked: a repository's own files change with every git command."""
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class FileState:
    kind: Literal["file", "link"]
    size: int
    mtime_ns: int
    digest: str | None
    """sha256 of the content (of the target, for a link); None: not read (too large, or
    past the snapshot's reading budget)."""
    text: bool | None
    """None: not read."""
    kept: bool
    """Its content is in the store (a diff can show it)."""

    def same_as(self, other: FileState) -> bool:
        if self.kind != other.kind:
            return False
        if self.digest is not None and other.digest is not None:
            return self.digest == other.digest
        return (self.size, self.mtime_ns) == (other.size, other.mtime_ns)


@dataclass(frozen=True)
class FilesSnapshot:
    files: Mapping[str, FileState]
    notes: tuple[str, ...] = ()


class BlobStore:
    """Contents by digest, in a private directory, at most `max_bytes` of them."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self._directory = directory
        self._max_bytes = max_bytes
        self.used = 0
        self.full = False
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def put(self, digest: str, data: bytes) -> bool:
        """Keep `data` (once); False when the store is full."""
        path = self._directory / digest
        if path.exists():
            return True
        if self.used + len(data) > self._max_bytes:
            self.full = True
            return False
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        self.used += len(data)
        return True

    def get(self, digest: str) -> bytes | None:
        try:
            return (self._directory / digest).read_bytes()
        except OSError:
            return None


class FilesTree:
    """Snapshots of one plain directory, `root` (resolved)."""

    kind: Literal["files"] = "files"

    def __init__(self, root: str, store: BlobStore, limits: ChangeLimits) -> None:
        self.root = root
        self._store = store
        self._limits = limits

    def take(self, previous: FilesSnapshot | None) -> FilesSnapshot:
        """What `root` holds now; a file whose size and time are those of `previous` is
        not read again."""
        walk = _Walk(self, previous.files if previous is not None else {})
        try:
            root_fd = os.open(self.root, _DIRECTORY_FLAGS)
        except OSError as exc:
            return FilesSnapshot({}, (f"{self.root} cannot be read: {exc.strerror}",))
        walk.directory(root_fd, "")
        return FilesSnapshot(walk.files, tuple(walk.notes))

    def compare(
        self, before: FilesSnapshot, after: FilesSnapshot
    ) -> tuple[list[ChangedFile], list[str]]:
        """The files that differ, renames paired by content, and the notes of both."""
        old, new = before.files, after.files
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        changed: list[ChangedFile] = []
        moved_from: dict[str, str] = {}
        gone_by_digest = {old[path].digest: path for path in removed if old[path].digest}
        for path in added:
            source = gone_by_digest.pop(new[path].digest, None) if new[path].digest else None
            if source is not None:
                moved_from[path] = source
        counted = 0
        for path in sorted(set(added) | set(removed) | set(old) & set(new)):
            if path in old and path in new and old[path].same_as(new[path]):
                continue
            if path in removed and path in moved_from.values():
                continue
            before_state = old.get(moved_from.get(path, path))
            after_state = new.get(path)
            lines: tuple[int, int] | None = None
            if counted < self._limits.max_counted:
                lines = self._count(before_state, after_state)
                counted += 1
            status: ChangeStatus = "modified"
            if path in moved_from:
                status = "renamed"
            elif path in added:
                status = "added"
            elif path in removed:
                status = "removed"
            changed.append(
                ChangedFile(
                    root=self.root,
                    path=path,
                    status=status,
                    old_path=moved_from.get(path),
                    binary=_binary(before_state, after_state),
                    added=lines[0] if lines else None,
                    removed=lines[1] if lines else None,
                )
            )
        notes = list(dict.fromkeys([*before.notes, *after.notes]))
        return changed, notes

    def diff(self, before: FilesSnapshot, after: FilesSnapshot, changed: ChangedFile) -> FileDiff:
        old = before.files.get(changed.old_path or changed.path)
        new = after.files.get(changed.path)
        if _binary(old, new):
            sizes = " → ".join(f"{state.size:,} bytes" for state in (old, new) if state)
            return FileDiff.of(
                changed, self.kind, binary=True, note=f"a binary file ({sizes}): no text to compare"
            )
        old_text, new_text = self._text(old), self._text(new)
        if old_text is None or new_text is None:
            why = (
                f"larger than {size_text(self._limits.max_text_bytes)}"
                if any(s is not None and s.digest is None for s in (old, new))
                else "the snapshots had reached their size limit"
            )
            return FileDiff.of(
                changed, self.kind, note=f"its content was not kept ({why}): no diff"
            )
        old_lines, new_lines = (
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
        )
        if max(len(old_lines), len(new_lines)) > self._limits.max_diff_lines:
            return FileDiff.of(
                changed,
                self.kind,
                note=f"over {self._limits.max_diff_lines:,} lines: too long to compare here",
            )
        lines = difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile="a/" + (changed.old_path or changed.path) if old else "/dev/null",
            tofile="b/" + changed.path if new else "/dev/null",
        )
        text, cut = _bounded_text(lines, self._limits.max_diff_bytes)
        return FileDiff.of(
            changed, self.kind, diff=text, truncated=cut, note=_cut_note(cut, self._limits)
        )

    def _text(self, state: FileState | None) -> str | None:
        if state is None:
            return ""
        if state.digest is None or not state.kept:
            return None
        data = self._store.get(state.digest)
        return None if data is None else data.decode("utf-8", errors="replace")

    def _count(self, old: FileState | None, new: FileState | None) -> tuple[int, int] | None:
        if _binary(old, new):
            return None
        texts = [self._text(state) for state in (old, new)]
        if texts[0] is None or texts[1] is None:
            return None
        old_lines, new_lines = texts[0].splitlines(), texts[1].splitlines()
        if max(len(old_lines), len(new_lines)) > self._limits.max_diff_lines:
            return None
        return _line_counts(old_lines, new_lines)


class _Walk:
    """One walk of a tree, in name order, within the bounds."""

    def __init__(self, tree: FilesTree, previous: Mapping[str, FileState]) -> None:
        self._tree = tree
        self._limits = tree._limits
        self._store = tree._store
        self._previous = previous
        self._deadline = time.monotonic() + self._limits.max_seconds
        self._visited = 0
        self._read = 0
        self._stopped = False
        self.files: dict[str, FileState] = {}
        self.notes: list[str] = []

    def directory(self, fd: int, prefix: str) -> None:
        try:
            with os.scandir(fd) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            for entry in entries:
                if self._stopped or not self._within_bounds():
                    return
                path = prefix + entry.name
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    if entry.name in _SKIPPED_DIRECTORIES:
                        continue
                    try:
                        child = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=fd)
                    except OSError:
                        continue
                    self.directory(child, path + "/")
                elif stat.S_ISLNK(info.st_mode):
                    self._link(fd, entry.name, path, info)
                elif stat.S_ISREG(info.st_mode):
                    self._file(fd, entry.name, path, info)
        finally:
            os.close(fd)

    def _within_bounds(self) -> bool:
        self._visited += 1
        root = self._tree.root
        if self._visited > self._limits.max_entries:
            self._stop(
                f"{root} holds more than {self._limits.max_entries:,} files and directories: "
                "only the first (in name order) were compared"
            )
        elif time.monotonic() > self._deadline:
            self._stop(
                f"{root} took longer than {self._limits.max_seconds:g} s to read: only part "
                "of it was compared"
            )
        return not self._stopped

    def _stop(self, note: str) -> None:
        self._stopped = True
        self.notes.append(note)

    def _link(self, fd: int, name: str, path: str, info: os.stat_result) -> None:
        try:
            target = os.readlink(name, dir_fd=fd).encode("utf-8", errors="surrogateescape")
        except OSError:
            return
        digest = hashlib.sha256(b"link:" + target).hexdigest()
        kept = self._store.put(digest, b"-> " + target + b"\n")
        self.files[path] = FileState("link", len(target), info.st_mtime_ns, digest, True, kept)

    def _file(self, fd: int, name: str, path: str, info: os.stat_result) -> None:
        known = self._previous.get(path)
        if (
            known is not None
            and known.kind == "file"
            and (known.size, known.mtime_ns) == (info.st_size, info.st_mtime_ns)
        ):
            self.files[path] = known
            return
        unread = FileState("file", info.st_size, info.st_mtime_ns, None, None, False)
        limits = self._limits
        too_big = info.st_size > limits.max_text_bytes
        if too_big or self._read + info.st_size > limits.max_read_bytes:
            if not too_big and not any("reading budget" in note for note in self.notes):
                self.notes.append(
                    f"over {size_text(limits.max_read_bytes)} changed at once: the rest "
                    "were compared by size and time (reading budget)"
                )
            self.files[path] = unread
            return
        data = _read_regular(fd, name, limits.max_text_bytes)
        if data is None:
            return
        self._read += len(data)
        digest = hashlib.sha256(data).hexdigest()
        text = _is_text(data, limits.binary_probe_bytes)
        kept = text and self._store.put(digest, data)
        if text and not kept and not any("size limit" in note for note in self.notes):
            self.notes.append(
                f"the snapshots reached their size limit ({size_text(limits.max_store_bytes)}): "
                "later contents are compared, not kept"
            )
        self.files[path] = FileState("file", len(data), info.st_mtime_ns, digest, text, kept)


def _read_regular(fd: int, name: str, most: int) -> bytes | None:
    """The content of the regular file `name` in directory `fd` (never through a link, never
    a FIFO or a device), at most `most` bytes; None when it is none or cannot be read."""
    try:
        handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        chunks = []
        left = most + 1
        while left > 0:
            chunk = os.read(handle, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return None if len(data) > most else data
    except OSError:
        return None
    finally:
        os.close(handle)


def _is_text(data: bytes, probe: int) -> bool:
    if b"\0" in data[:probe]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _binary(*states: FileState | None) -> bool:
    return any(state is not None and state.text is False for state in states)


def _line_counts(old: list[str], new: list[str]) -> tuple[int, int]:
    """(lines added, lines removed) from `old` to `new`."""
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def _bounded_text(lines: Iterable[str], most: int) -> tuple[str, bool]:
    """The lines joined, cut at `most` bytes (at a line's end); whether it was cut."""
    kept: list[str] = []
    size = 0
    for line in lines:
        text = line if line.endswith("\n") else line + "\n"
        size += len(text.encode("utf-8", errors="replace"))
        if size > most:
            return "".join(kept), True
        kept.append(text)
    return "".join(kept), False


def _cut_note(cut: bool, limits: ChangeLimits) -> str:
    return f"the diff is longer than {size_text(limits.max_diff_bytes)}: cut there" if cut else ""
