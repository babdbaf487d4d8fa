"""The benchmark's real two-node Ray cluster (bench/ray_cluster.py) for tests: skipped (or,
with CI=true, failed) when Ray is not installed, its files in a short directory removed when
the test process exits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from bench.ray_cluster import RayCluster, ray_cluster as two_node_cluster, ray_command
from tests.support.parts import require
from tests.support.sandboxd_harness import short_dir


@contextlib.contextmanager
def ray_cluster() -> Iterator[RayCluster]:
    """A head and a second node, stopped (with everything they started) afterwards."""
    require(ray_command().exists(), "Ray is not installed: pip install 'logos[ray]'")
    with two_node_cluster(short_dir("ray")) as cluster:
        yield cluster
