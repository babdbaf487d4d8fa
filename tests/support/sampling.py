"""What a test watches while it loads the daemon: its resident memory, sampled peaks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path


def rss_bytes(pid: int) -> int:
    """The process's resident memory now (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class PeakOf:
    """The highest value of `measure()` seen, sampled every `interval_s` from a thread while
    the `with` block runs (and once before it)."""

    def __init__(self, measure: Callable[[], int], interval_s: float = 0.005) -> None:
        self._measure = measure
        self._interval_s = interval_s
        self.peak = measure()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def __enter__(self) -> PeakOf:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.peak = max(self.peak, self._measure())
