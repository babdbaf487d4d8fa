"""Directories only their owner can enter, for what must stay private (tokens, records)."""

from __future__ import annotations

from pathlib import Path


def make_private_dirs(path: Path) -> None:
    """Create `path` and every missing parent 0700; OSError when one cannot be made.

    WHY not `mkdir(parents=True)`: it makes the parents 0777 less the umask, so a directory
    others may list and enter would lead to the private one.
    """
    missing = [directory for directory in (path, *path.parents) if not directory.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
