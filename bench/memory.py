"""Peak resident memory of a process while something runs, read from /proc."""

from __future__ import annotations

import threading
from pathlib import Path

SAMPLE_INTERVAL_S = 0.005


def read_status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/<pid>/status (e.g. VmRSS, VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(f"/proc/{pid}/status has no {field} line: is {pid} a kernel thread?")


class PeakRss:
    """Watches one process from `__enter__` to `__exit__`; `peak_bytes` is its highest RSS.

    WHY two sources: the kernel's high-water mark (VmHWM) is exact, but only after resetting
    it through /proc/<pid>/clear_refs, which needs write access to that process; sampling
    VmRSS works for any process we can read, and misses only spikes shorter than the interval.
    The peak is the larger of the two.
    """

    def __init__(self, pid: int, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.baseline_bytes = 0
        self.peak_bytes = 0
        self.after_bytes = 0
        """VmRSS at `__exit__`: what the process kept once the work was done."""
        self.exact = False
        """True when the peak includes the reset high-water mark."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=f"rss-{pid}", daemon=True)
        self._sampled_kib = 0

    @property
    def growth_bytes(self) -> int:
        return max(0, self.peak_bytes - self.baseline_bytes)

    def __enter__(self) -> PeakRss:
        baseline = read_status_kib(self.pid, "VmRSS")
        self.baseline_bytes = baseline * 1024
        self._sampled_kib = baseline
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            self.exact = True
        except OSError:
            self.exact = False
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        peak = self._sampled_kib
        try:
            after = read_status_kib(self.pid, "VmRSS")
        except (OSError, LookupError):
            after = 0  # the process is gone
        self.after_bytes = after * 1024
        peak = max(peak, after)
        if self.exact:
            try:
                peak = max(peak, read_status_kib(self.pid, "VmHWM"))
            except (OSError, LookupError):
                self.exact = False
        self.peak_bytes = peak * 1024

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                rss = read_status_kib(self.pid, "VmRSS")
            except (OSError, LookupError):
                return  # the process is gone: its peak is what we saw
            self._sampled_kib = max(self._sampled_kib, rss)
