"""Swapping a checked path with a symlink over and over, as an attacker racing a sandbox's
check and its mount does: the standard way to test a check-then-use race on paths."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    first, second = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
    print("swapping", flush=True)
    while True:
        libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE)
    """
)
"""Exchanges argv[1] and argv[2] atomically (renameat2(RENAME_EXCHANGE), syscall 316 on
x86-64) in a loop; prints "swapping" once it starts. Runs on the host or in a sandbox."""

RENAMER = textwrap.dedent(
    """
    import os, sys
    first, second = sys.argv[1], sys.argv[2]
    held = first + ".held"
    print("swapping", flush=True)
    while True:
        os.rename(first, held)
        os.rename(second, first)
        os.rename(first, second)
        os.rename(held, first)
    """
)
"""The same swap made of four plain renames (never atomic: `first` is missing at times)."""

Swap = Literal["exchange", "rename"]


@contextmanager
def swapping(first: Path, second: Path, how: Swap = "exchange") -> Iterator[None]:
    """Swap `first` and `second` over and over, until the block ends; the names are left as
    they were."""
    script = SWAPPER if how == "exchange" else RENAMER
    swapper = subprocess.Popen(
        [sys.executable, "-c", script, str(first), str(second)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "swapping"
        yield
    finally:
        swapper.kill()
        swapper.wait()
    put_back(first, second)


def put_back(first: Path, second: Path) -> None:
    """Leave `first` the directory and `second` the symlink again, once a swapper has stopped
    at any point of its loop."""
    held = Path(f"{first}.held")
    if held.exists():
        if first.exists() or first.is_symlink():
            first.rename(second)
        held.rename(first)
    if first.is_symlink():
        first.rename(held)
        second.rename(first)
        held.rename(second)
