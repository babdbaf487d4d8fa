"""The daemon process's own resources: how many files it may open, how it gives memory back.

Open files: every client connection is a descriptor. With the usual soft limit of 1,024, a
thousand idle connections used them all, and the daemon could no longer accept, open a
container's socket or talk to the engine. The soft limit is raised to the hard one at start,
and connections are capped below it, leaving room for the daemon's own descriptors.

Memory: a large reply is built and freed in blocks of tens of MiB. glibc serves blocks of
128 KiB or more from their own mappings, unmapped when freed, but it raises that threshold
each time such a block is freed (up to 32 MiB); from then on these blocks come from the heap,
and the memory freed in the middle of the heap stays with the process. A fixed threshold
stops the raise, so the memory of a reply goes back to the system once it is sent.
"""

from __future__ import annotations

import ctypes
import logging
import resource
from pathlib import Path

logger = logging.getLogger(__name__)

FD_RESERVE = 256
"""Descriptors kept for the daemon itself beside client connections: the engine's connection
pool, one socket per container, the audit log, pinned paths, the interpreter's own."""
_MMAP_THRESHOLD_BYTES = 1024**2
"""Blocks this large or larger get their own mapping, returned to the system when freed."""
_M_MMAP_THRESHOLD = -3
"""mallopt's parameter number in glibc's malloc.h."""
_NR_OPEN = Path("/proc/sys/fs/nr_open")


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit in effect."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _kernel_open_files_max()
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            logger.warning("cannot raise the open-files limit from %d to %d: %s", soft, target, exc)
            return soft
        logger.info("open-files limit raised from %d to %d", soft, target)
        return target
    effective = target if soft == resource.RLIM_INFINITY else soft
    logger.info("open-files limit: %d (the hard limit)", effective)
    return effective


def connection_cap(configured: int, open_files: int) -> int:
    """`configured` (max_connections), lowered when it would not leave FD_RESERVE descriptors
    free under `open_files`; under a tiny limit, connections get half of it."""
    room = max(open_files - FD_RESERVE, open_files // 2)
    if configured <= room:
        return configured
    logger.warning(
        "max_connections lowered from %d to %d: the open-files limit is %d and the daemon "
        "keeps %d descriptors for itself; raise the hard limit (ulimit -Hn, systemd's "
        "LimitNOFILE=) to serve more",
        configured,
        room,
        open_files,
        FD_RESERVE,
    )
    return room


def return_freed_memory_promptly() -> None:
    """Fix glibc's mmap threshold (see the module's note); elsewhere, nothing to do."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        logger.info("no mallopt in this C library: freed memory is returned as it sees fit")
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES) != 1:
        logger.warning("mallopt(M_MMAP_THRESHOLD) failed: large replies may stay resident")


def _kernel_open_files_max() -> int:
    """fs.nr_open: the most any process may open (what an unlimited hard limit means)."""
    try:
        return int(_NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1024**2
