"""Family 12: what network by name costs: requests through the egress proxy against a
sandbox with the network fully on.

One daemon (allow_network, allow_private_hosts, a name table for the test host) and one HTTP
server on the host, bound to the Docker bridge's gateway address so that both sandboxes reach
it: one session with `allowed_hosts` (no network; the forwarder and the daemon's proxy carry
every byte) and one with `network = true` (the bridge, straight to the server). Inside each
sandbox a small script times each request itself (a new connection per request, as a
package manager's first fetch), so the command's own round trip is left out. Rounds
alternate between the two sandboxes so that drift hits both alike. Then each downloads a
large body once; its rate is bytes over the script's own time.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.daemon import BenchSetupError, check_image, docker_client, running_daemon
from bench.plan import Plan
from bench.results import Section, Series, SeriesGroup, Target, mib, ms, ratio
from logos.options import ExecOptions
from sandboxd.client.runner import SandboxRunner

FAMILY = "egress"
TITLE = "Network by name: the egress proxy against the network fully on"
HOST = "bench.test"
CHUNK = b"x" * (1024 * 1024)
PROXY = "allowed_hosts (egress proxy)"
DIRECT = "network = true (bridge)"
LATENCY_GOAL_S = 0.005
"""The proxy may add this much to a request's median (a DNS lookup costs more)."""
THROUGHPUT_GOAL = 0.5
"""A large download through the proxy at half the direct rate or better."""

TIMED_GETS = """
import json, sys, time, urllib.request
url, count = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(count):
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as answer:
        answer.read()
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""

TIMED_DOWNLOAD = """
import json, sys, time, urllib.request
started = time.perf_counter()
size = 0
with urllib.request.urlopen(sys.argv[1], timeout=120) as answer:
    while True:
        block = answer.read(1 << 20)
        if not block:
            break
        size += len(block)
print(json.dumps([size, time.perf_counter() - started]))
"""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    big_bytes = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        size = self.big_bytes if self.path == "/big" else 2
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.path != "/big":
            self.wfile.write(b"ok")
            return
        left = size
        while left > 0:
            part = CHUNK[: min(left, len(CHUNK))]
            self.wfile.write(part)
            left -= len(part)


@contextmanager
def _server(address: str, big_bytes: int) -> Iterator[int]:
    handler = type("Handler", (_Handler,), {"big_bytes": big_bytes})
    httpd = ThreadingHTTPServer((address, 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _bridge_gateway() -> str:
    client = docker_client()
    try:
        configs = client.api.inspect_network("bridge")["IPAM"]["Config"]
    finally:
        client.close()
    for config in configs:
        if config.get("Gateway") and ":" not in config["Gateway"]:
            return str(config["Gateway"])
        subnet = ipaddress.ip_network(config.get("Subnet") or "::/128")
        if subnet.version == 4:  # the default bridge lists no gateway: its first address
            return str(subnet.network_address + 1)
    raise BenchSetupError("the Docker bridge network has no IPv4 gateway to serve on")


async def _script(runner: SandboxRunner, options: ExecOptions, script: str, *args: str) -> Any:
    command = f"python3 -c {shlex.quote(script)} {' '.join(shlex.quote(a) for a in args)}"
    result = await runner.run(command, options)
    if not result.ok:
        raise BenchSetupError(f"the timing script failed in the sandbox: {result}")
    return json.loads(result.stdout)


async def run(plan: Plan) -> Section:
    check_image(plan.image)
    gateway = _bridge_gateway()
    config = (
        f'allow_network = true\nallow_private_hosts = true\n[egress_hosts]\n"{HOST}" = '
        f'["{gateway}"]\n'
    )
    samples: dict[str, list[float]] = {PROXY: [], DIRECT: []}
    rates: dict[str, tuple[int, float]] = {}
    with (
        _server(gateway, plan.egress_download_bytes) as port,
        running_daemon(plan.image, config) as daemon,
    ):
        proxied_options = ExecOptions(
            allowed_hosts=(f"{HOST}:{port}", f"{gateway}:{port}"), timeout_s=600
        )
        direct_options = ExecOptions(timeout_s=600)
        urls = {PROXY: f"http://{HOST}:{port}", DIRECT: f"http://{gateway}:{port}"}
        session = uuid.uuid4().hex[:8]
        async with (
            SandboxRunner(daemon.socket, session=f"bench-egress-{session}") as proxied,
            SandboxRunner(daemon.socket, session=f"bench-net-{session}", network=True) as direct,
        ):
            ways = {PROXY: (proxied, proxied_options), DIRECT: (direct, direct_options)}
            for label, (runner, options) in ways.items():  # warm: sandbox, caches, server
                await _script(runner, options, TIMED_GETS, urls[label] + "/", "3")
            for round_index in range(plan.egress_rounds):
                order = [PROXY, DIRECT] if round_index % 2 == 0 else [DIRECT, PROXY]
                for label in order:
                    runner, options = ways[label]
                    times = await _script(
                        runner, options, TIMED_GETS, urls[label] + "/", str(plan.egress_requests)
                    )
                    samples[label].extend(float(t) for t in times)
            for label in (PROXY, DIRECT):
                runner, options = ways[label]
                size, seconds = await _script(runner, options, TIMED_DOWNLOAD, urls[label] + "/big")
                rates[label] = (int(size), float(seconds))
    return _section(plan, samples, rates)


def _section(
    plan: Plan, samples: dict[str, list[float]], rates: dict[str, tuple[int, float]]
) -> Section:
    series = {label: Series(label, tuple(values)) for label, values in samples.items()}
    added = series[PROXY].median_s - series[DIRECT].median_s
    rate = {label: size / seconds for label, (size, seconds) in rates.items()}
    problems = [
        f"{label}: downloaded {size} bytes, not {plan.egress_download_bytes}"
        for label, (size, _) in rates.items()
        if size != plan.egress_download_bytes
    ]
    rows = tuple(
        (
            label,
            ms(series[label].median_s),
            ms(series[label].p95_s),
            ratio(series[label].median_s, series[DIRECT].median_s),
            f"{mib(rate[label])}/s",
            ratio(rate[label], rate[DIRECT]),
        )
        for label in (PROXY, DIRECT)
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=(
            "sandbox",
            "request median",
            "request p95",
            "vs network on",
            f"download {mib(plan.egress_download_bytes)}",
            "vs network on",
        ),
        rows=rows,
        groups=(
            SeriesGroup(
                "HTTP GET on a new connection, timed in the sandbox", tuple(series.values())
            ),
        ),
        targets=(
            Target(
                f"proxy adds <= {ms(LATENCY_GOAL_S)} to a request's median",
                ms(added),
                added <= LATENCY_GOAL_S,
            ),
            Target(
                f"download through the proxy >= {THROUGHPUT_GOAL:g}x the direct rate",
                ratio(rate[PROXY], rate[DIRECT]),
                rate[PROXY] >= THROUGHPUT_GOAL * rate[DIRECT],
            ),
        ),
        notes=(
            f"{plan.egress_rounds} alternating rounds of {plan.egress_requests} GETs of a 2-byte "
            "body from a host server on the Docker bridge's gateway, each on a new connection, "
            "timed by python3's urllib inside the sandbox (the proxied one reaches it by name "
            "through its forwarder and the daemon's egress proxy)",
        ),
        problems=tuple(problems),
        raw={
            "added_median_s": added,
            "download_bytes": plan.egress_download_bytes,
            "download": {label: {"bytes": s, "seconds": t} for label, (s, t) in rates.items()},
        },
    )
