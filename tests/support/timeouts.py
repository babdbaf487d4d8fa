"""A test's timeout (pytest-timeout's: its mark, else the pytest config's) is what it may
take on a machine of its own. Spread over more worker processes than there are CPUs, each
test has a share of one, and its timeout is stretched by as much.

WHY: a timeout stops a test that hangs; it is no speed check (speed is measured in bench/),
and a sound test must not fail for having waited its turn for a CPU.
"""

from __future__ import annotations

import os

import pytest


def cpu_share() -> float:
    """How many of this run's worker processes share each CPU (1 outside pytest-xdist)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1.0, workers / (os.cpu_count() or 1))


def stretch_timeouts(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test a timeout mark of its own timeout times `cpu_share()`."""
    share = cpu_share()
    if share == 1.0:
        return
    default = config.getoption("timeout", None) or config.getini("timeout")
    for item in items:
        marker = item.get_closest_marker("timeout")
        kwargs = dict(marker.kwargs) if marker is not None else {}
        if marker is not None and marker.args:
            timeout = marker.args[0]
        else:
            timeout = kwargs.pop("timeout", default)
        if not timeout or float(timeout) <= 0:
            continue  # none, or switched off for this test
        # WHY append=False: the closest mark is the first of the test's own.
        item.add_marker(pytest.mark.timeout(float(timeout) * share, **kwargs), append=False)
