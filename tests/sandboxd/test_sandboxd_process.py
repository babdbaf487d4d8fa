"""The daemon process's own resources, each measured in a fresh child process."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandboxd.server.process import FD_RESERVE, connection_cap
from tests.support.parts import require

REPO = Path(__file__).resolve().parents[2]


def _child(code: str, *, soft_open_files: int | None = None) -> dict[str, int]:
    def limit() -> None:
        if soft_open_files is not None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft_open_files, hard))

    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        preexec_fn=limit,
    )
    report: dict[str, int] = json.loads(completed.stdout)
    return report


def test_the_soft_open_files_limit_is_raised_to_the_hard_one() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    require(hard == resource.RLIM_INFINITY or hard > 1024, "the hard limit is 1,024 here")
    report = _child(
        """
        import json, resource
        from sandboxd.server.process import raise_open_files_limit
        returned = raise_open_files_limit()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        print(json.dumps({"returned": returned, "soft": soft, "hard": hard}))
        """,
        soft_open_files=1024,
    )
    assert report["soft"] == report["returned"] > 1024
    if report["hard"] != resource.RLIM_INFINITY:
        assert report["soft"] == report["hard"]


def test_connections_are_capped_below_the_open_files_limit() -> None:
    assert connection_cap(512, 20_000) == 512
    assert connection_cap(4096, 1024) == 1024 - FD_RESERVE
    assert connection_cap(512, 300) == 150  # a tiny limit: half of it for connections


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_freed_reply_sized_blocks_go_back_to_the_system() -> None:
    report = _child(
        """
        import json
        from sandboxd.server.process import return_freed_memory_promptly

        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024

        return_freed_memory_promptly()
        baseline = rss()
        reply = b"y" * (20 * 2**20)  # once freed, glibc would raise its mmap threshold
        del reply
        replies, survivors = [], []
        for _ in range(100):
            replies.append(b"x" * (2 * 2**20))
            survivors.append(bytearray(200 * 1024))  # long-lived, between the replies
        peak = rss()
        del replies
        print(json.dumps({"baseline": baseline, "peak": peak, "after": rss()}))
        """
    )
    mib = 1024**2
    assert report["peak"] - report["baseline"] > 200 * mib
    # What stays is the survivors (20 MiB), not the 200 MiB of freed replies.
    assert report["after"] - report["baseline"] < 48 * mib, report
