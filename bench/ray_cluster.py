"""A real two-node Ray cluster on this machine: a head and a second node, each started as its
own `ray start --block` process (1 CPU each), importing this checkout.

Each node can be killed on its own, as a lost machine would be: the node's `ray start`
process and everything under it (raylet, workers, the commands they ran) get SIGKILL.
The `batch` benchmark runs tasks on it, and the tests of `logos batch --ray` use it too
(through tests/support/ray_cluster.py, which skips when Ray is missing).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.daemon import BenchSetupError

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 90.0
NODE_IP = "127.0.0.1"


@dataclass
class RayCluster:
    address: str
    env: dict[str, str]
    nodes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def head(self) -> subprocess.Popen[bytes]:
        return self.nodes[0]

    @property
    def second(self) -> subprocess.Popen[bytes]:
        return self.nodes[1]

    def alive_node_ids(self) -> list[str]:
        """The ids of the nodes the cluster counts as alive (asked through a real driver)."""
        script = (
            "import json, ray\n"
            f"ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False)\n"
            "print('NODES', json.dumps([n['NodeID'] for n in ray.nodes() if n['Alive']]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=True,
        )
        # WHY the marker: Ray prints its own warnings on stdout too (e.g. about lost nodes)
        line = next(line for line in done.stdout.splitlines() if line.startswith("NODES "))
        ids: list[str] = json.loads(line.removeprefix("NODES "))
        return ids

    def kill(self, node: subprocess.Popen[bytes]) -> None:
        """SIGKILL the node's `ray start` and every process under it: the machine is gone."""
        for pid in [node.pid, *descendants(node.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.wait()


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children…), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((NODE_IP, 0))
        port: int = probe.getsockname()[1]
        return port


def ray_command() -> Path:
    """The `ray` command beside this Python (installed with it by `pip install 'logos[ray]'`)."""
    return Path(sys.executable).with_name("ray")


@contextlib.contextmanager
def ray_cluster(temp_dir: Path) -> Iterator[RayCluster]:
    """A head and a second node keeping their files in `temp_dir` (keep its path short: Ray
    puts Unix sockets there), stopped with everything they started afterwards."""
    ray_bin = ray_command()
    if not ray_bin.exists():
        raise BenchSetupError("Ray is not installed: pip install 'logos[ray]'")
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(":"),
        "PATH": f"{ray_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    cluster = RayCluster(address=f"{NODE_IP}:{port}", env=env)
    common = ["--block", "--num-cpus=1", f"--node-ip-address={NODE_IP}"]
    try:
        cluster.nodes.append(
            _start(
                [
                    str(ray_bin),
                    "start",
                    "--head",
                    *common,
                    f"--port={port}",
                    f"--temp-dir={temp_dir}",
                    "--include-dashboard=false",
                    "--disable-usage-stats",
                ],
                env,
            )
        )
        _wait_for_nodes(cluster, 1)
        cluster.nodes.append(
            _start([str(ray_bin), "start", *common, f"--address={cluster.address}"], env)
        )
        _wait_for_nodes(cluster, 2)
        yield cluster
    finally:
        for node in reversed(cluster.nodes):
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in reversed(cluster.nodes):
            try:
                node.wait(30)
            except subprocess.TimeoutExpired:
                cluster.kill(node)


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
        start_new_session=True,
    )


def _wait_for_nodes(cluster: RayCluster, count: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(node.poll() is not None for node in cluster.nodes):
            raise BenchSetupError("a Ray node exited while starting")
        with contextlib.suppress(subprocess.SubprocessError, ValueError, StopIteration):
            if len(cluster.alive_node_ids()) >= count:
                return
        time.sleep(0.5)
    raise BenchSetupError(f"the Ray cluster did not reach {count} nodes in {START_TIMEOUT_S:g} s")
