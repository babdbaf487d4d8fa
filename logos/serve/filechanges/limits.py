"""Every bound on what a snapshot of the work may cost, in one place: a command can write
anything into the paths it was granted (a million files, a 10 GB file, a FIFO), and the
server must stay small and quick whatever it wrote. Each bound that is reached is said in
the change list or the diff, never silently."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class ChangeLimits:
    max_entries: int = 10_000
    """Files, links and directories one snapshot of a plain directory visits (in name order);
    for git, the new or changed files (not ignored) one snapshot hashes."""
    max_text_bytes: int = 1 * MiB
    """A plain directory's file larger than this is compared by size and time; its content
    is not kept (no diff)."""
    max_git_file_bytes: int = 16 * MiB
    """A file larger than this is not hashed into a git snapshot: a note holding its size and
    time stands in for it (so a change still shows)."""
    max_read_bytes: int = 128 * MiB
    """Content one snapshot reads; past it, files are compared by size and time."""
    max_store_bytes: int = 128 * MiB
    """Content one run's or project's snapshots keep on disk, at most."""
    max_seconds: float = 20.0
    """One snapshot's time; past it the snapshot says where it stopped."""
    max_snapshots: int = 64
    """Snapshots one run or project keeps for diffs (the first is always kept): older turns
    keep their list of files, not their diffs."""
    max_listed: int = 500
    """Files one change list names."""
    max_counted: int = 200
    """Files of a change list whose added and removed lines are counted."""
    max_diff_lines: int = 20_000
    """Lines of a file compared line by line (a plain directory's diff)."""
    max_diff_bytes: int = 512 * 1024
    """Bytes of one diff sent to the page."""
    binary_probe_bytes: int = 8192
    """A file with a NUL byte in its first this many bytes (or not UTF-8) is binary."""


LIMITS = ChangeLimits()


def size_text(size: int) -> str:
    """`size` bytes as a person reads it: 512 bytes, 16 KiB, 128 MiB."""
    if size < 1024:
        return f"{size:,} bytes"
    if size < MiB:
        return f"{size / 1024:,.0f} KiB"
    return f"{size / MiB:,.0f} MiB"
