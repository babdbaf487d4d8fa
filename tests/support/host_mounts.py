"""Real mounts on the host for tests of what a sandbox sees beneath its grants."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.parts import require


@contextmanager
def tmpfs_at(directory: Path, *, options: str = "size=1m") -> Iterator[Path]:
    """A small tmpfs mounted at `directory` (made when missing) until the block ends."""
    require(os.geteuid() == 0, "mounting a tmpfs needs root")
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "sandboxd-test", str(directory)],
        capture_output=True,
        text=True,
    )
    require(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        unmount(directory)


@contextmanager
def bound_at(target: Path, source: Path) -> Iterator[Path]:
    """`source` bind-mounted at `target` (made when missing, as a file for a file) until the
    block ends."""
    require(os.geteuid() == 0, "bind mounts need root")
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
    try:
        yield target
    finally:
        unmount(target)


def unmount(directory: Path) -> None:
    """Unmount `directory`; lazily when something still holds it (a test's container)."""
    if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(directory)], check=True)
