"""Times the consecutive steps of one piece of work, such as a sandbox's start.

WHY: a new session's start is several engine calls and a handshake; only a figure per step
says which one to make shorter. The steps go to the audit line and the benchmark.
"""

from __future__ import annotations

import time
from collections.abc import Mapping


class StepClock:
    """Seconds since the previous lap (or since the clock was made), per named step."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.steps: dict[str, float] = {}

    def lap(self, step: str) -> None:
        """`step` ended now; a step timed twice adds up."""
        now = time.monotonic()
        self.steps[step] = round(self.steps.get(step, 0.0) + now - self._last, 6)
        self._last = now


def describe_steps(steps: Mapping[str, float]) -> str:
    """One line for a log: `create 41.2 ms, start 180.0 ms, …`."""
    return ", ".join(f"{step} {seconds * 1000:.1f} ms" for step, seconds in steps.items())
