"""`sandboxd doctor`: prove, with a real container, that the sandbox works and holds.

Each check prints `ok` or `FAIL` with what to do; the engine is used directly (no daemon
needed), and a daemon on the socket, if any, is asked for its health too.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import httpx

from sandboxd.api import API_PREFIX
from sandboxd.backend import Backend, ExecRequest, Limits, Mount, SandboxSpec
from sandboxd.client.connection import daemon_client, health as read_health, not_running_message
from sandboxd.server.backends import build_backend
from sandboxd.server.config import DaemonConfig
from sandboxd.sessions.pool import PoolSettings

_DOCTOR_LIMITS = Limits(memory=256 * 1024**2, cpus=0.5, pids=64, tmp=32 * 1024**2)
"""Small on purpose: the limits check proves they are applied and enforced."""

_Run = Callable[[str], Awaitable[tuple[str, int | None, bool]]]
"""Runs a command in the doctor's sandbox: (stdout + stderr, exit code, OOM-killed)."""

_CGROUP_READ = (
    "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
    "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
    "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"
)
_MEMORY_HOG = (
    "command -v python3 >/dev/null || exit 99; "
    "python3 -c 'data = b\"x\" * (512 * 1024 * 1024); print(len(data))'"
)


@dataclass
class _Report:
    out: TextIO
    failures: list[str] = field(default_factory=list)

    def ok(self, name: str, detail: str) -> None:
        print(f"ok    {name}: {detail}", file=self.out, flush=True)

    def fail(self, name: str, detail: str, fix: str) -> None:
        self.failures.append(name)
        print(f"FAIL  {name}: {detail}\n      fix: {fix}", file=self.out, flush=True)

    def note(self, name: str, detail: str) -> None:
        print(f"--    {name}: {detail}", file=self.out, flush=True)


async def run_doctor(config: DaemonConfig, socket_path: Path, out: TextIO | None = None) -> bool:
    """Run every check; True when none failed."""
    report = _Report(out if out is not None else sys.stdout)
    # A few workers and a short idle time: the doctor starts one sandbox and closes it.
    backend = build_backend(config.model_copy(update={"idle_ttl_s": 120.0, "max_workers": 4}))
    async with backend:
        health = await backend.health()
        if health.engine_version is None:
            report.fail("engine", "the Docker engine does not answer", "; ".join(health.problems))
        else:
            report.ok("engine", f"Docker {health.engine_version} answers")
        if health.image_present:
            report.ok("image", f"{health.image} is present")
        elif health.engine_version is not None:
            report.fail("image", f"{health.image} is missing", "run `sandboxd build-image`")
        if health.ok:
            await _container_checks(backend, config, report)
        else:
            report.note("sandbox", "skipped: the engine or the image is not ready")
    _daemon_check(socket_path, report)
    verdict = (
        "all checks passed" if not report.failures else f"failed: {', '.join(report.failures)}"
    )
    print(verdict, file=report.out)
    return not report.failures


async def _container_checks(backend: Backend, config: DaemonConfig, report: _Report) -> None:
    session = f"doctor-{secrets.token_hex(4)}"
    scratch = Path(os.path.realpath(tempfile.mkdtemp(prefix="sandboxd-doctor-")))
    read_only, writable = scratch / "ro", scratch / "rw"
    read_only.mkdir()
    writable.mkdir()
    (read_only / "probe").write_text("doctor\n")
    uid, gid = os.getuid(), os.getgid()
    spec = SandboxSpec(
        image=config.image,
        mounts=(Mount.of(str(read_only)), Mount.of(str(writable), read_only=False)),
        network=False,
        uid=uid,
        gid=gid,
        limits=_DOCTOR_LIMITS,
    )

    async def run(command: str, timeout_s: float = 60.0) -> tuple[str, int | None, bool]:
        outcome = await backend.run(
            session, spec, ExecRequest(command=command, timeout_s=timeout_s)
        )
        result = outcome.result
        if result.error:
            return f"error: {result.error}", None, False
        return result.stdout + result.stderr, result.exit_code, result.oom_killed

    try:
        began = time.monotonic()
        started = await backend.start(session, spec)
        if started.state == "started":
            _pool_note(config.pool, time.monotonic() - began, report)
        await _check_mounts(run, read_only, writable, uid, gid, report)
        output, _, _ = await run("ls /sys/class/net")
        interfaces = output.split()
        if interfaces == ["lo"]:
            report.ok("network", "off (only the loopback interface exists)")
        else:
            report.fail(
                "network",
                f"interfaces {interfaces} exist with network off",
                "check the engine and its runtime: a sandbox without network must get a "
                "network namespace of its own holding only its loopback",
            )
        output, code, _ = await run(_UNIX_SOCKET_PROBE)
        if code == 0:
            report.fail(
                "unix sockets",
                "a sandboxed command could create a Unix socket",
                "run sandboxd on a Linux kernel with seccomp (x86_64 or aarch64)",
            )
        else:
            report.ok("unix sockets", "denied to commands (host sockets under mounts unreachable)")
        output, code, _ = await run(_SUPERVISOR_PROBE)
        if code == 0 and output.strip() == "refused refused":
            report.ok("supervisor", "commands cannot trace it nor read its memory")
        else:
            report.fail(
                "supervisor",
                f"a sandboxed command could reach it ({output.strip() or f'status {code}'})",
                "run sandboxd on an engine that applies seccomp profiles (docker info shows "
                "seccomp among its security options)",
            )
        await _check_limits(run, report)
        await _check_egress(
            backend,
            session,
            dataclasses.replace(spec, allowed_hosts=(_EGRESS_PROBE_ALLOWED,)),
            report,
        )
    finally:
        await backend.close_session(session)
        shutil.rmtree(scratch, ignore_errors=True)


def _pool_note(pool: PoolSettings, start_s: float, report: _Report) -> None:
    """Whether the warm pool is on, with the measured cold start it would save, and, when it
    is off, when to turn it on (see the README's **Warm pool**)."""
    cold = f"a new session's sandbox started here in {start_s * 1000:.0f} ms"
    if pool.size > 0:
        report.ok(
            "warm pool",
            f"on, [pool] size = {pool.size}: {cold}; a spec started again within "
            f"{pool.remember_s:g} s takes a warm one instead",
        )
        return
    report.note(
        "warm pool",
        f"off (the default): {cold}. Turn it on with `[pool] size = 2` in the config when "
        "something starts many short sessions on the same paths with nothing to hide the "
        "start behind: `sandboxd run` in a script or a loop, `logos exec --sandbox`, a "
        "service opening a session per request. logos's own runs start their sandbox while "
        "the model writes its first reply, so they gain nothing from it",
    )


_EGRESS_PROBE_ALLOWED = "allowed.invalid"
_EGRESS_PROBE = """python3 -c '
import urllib.request as request
try:
    request.urlopen("http://refused.invalid/", timeout=20)
    print("reached")
except request.HTTPError as answer:
    print(answer.code, answer.read().decode(errors="replace").strip())
except Exception as exc:
    print("failed:", exc)
'"""
"""Asks the sandbox's proxy for a host its list does not name: the refusal proves the way
out (forwarder, socket, proxy) without any traffic leaving."""


async def _check_egress(backend: Backend, session: str, spec: SandboxSpec, report: _Report) -> None:
    outcome = await backend.run(session, spec, ExecRequest(command=_EGRESS_PROBE, timeout_s=60))
    result = outcome.result
    answer = (result.error or result.stdout).strip()
    if answer.startswith("403 blocked by sandbox policy: host refused.invalid"):
        report.ok("egress", "allowed_hosts: the proxy refuses hosts not in the list")
    else:
        report.fail(
            "egress",
            f"a sandbox with allowed_hosts did not get the proxy's refusal ({answer[:300]!r})",
            "check that the image has python3 and that the daemon's state_dir is on a local "
            "filesystem (its sockets are mounted into the sandbox)",
        )


_UNIX_SOCKET_PROBE = "python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>/dev/null"
_SUPERVISOR_PROBE = """python3 - <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
attached = libc.ptrace(16, 1, None, None) == 0  # PTRACE_ATTACH to PID 1, the supervisor
try:
    open("/proc/1/mem", "rb").close()
    readable = True
except OSError:
    readable = False
print("attached" if attached else "refused", "read" if readable else "refused")
EOF"""


async def _check_mounts(
    run: _Run, read_only: Path, writable: Path, uid: int, gid: int, report: _Report
) -> None:
    output, code, _ = await run(
        f"cat {read_only}/probe; "
        f"if touch {read_only}/x 2>/dev/null; then echo RO-WRITABLE; fi; "
        f"echo written > {writable}/out; id -u; id -g"
    )
    lines = output.split()
    if code != 0 or lines[:1] != ["doctor"]:
        report.fail(
            "mounts",
            f"the read-only mount is not readable in the sandbox ({output.strip()!r})",
            "check the engine's bind mounts (e.g. SELinux labels, rootless engine paths)",
        )
        return
    if "RO-WRITABLE" in lines:
        report.fail(
            "mounts",
            "a read-only mount accepted a write",
            "upgrade the Docker engine; read-only bind mounts must be enforced",
        )
        return
    out_file = writable / "out"
    if not out_file.is_file() or out_file.read_text() != "written\n":
        report.fail(
            "mounts",
            "a write to the read-write mount did not reach the host",
            "check the engine's bind mounts",
        )
        return
    owner = out_file.stat()
    if (owner.st_uid, owner.st_gid) != (uid, gid) or lines[-2:] != [str(uid), str(gid)]:
        report.fail(
            "identity",
            f"commands ran as {lines[-2:]} and wrote files owned by "
            f"{owner.st_uid}:{owner.st_gid}, expected {uid}:{gid}",
            "use an engine without user-namespace remapping for sandboxd",
        )
        return
    report.ok("mounts", "read-only refuses writes; read-write writes land on the host")
    report.ok("identity", f"commands run as {uid}:{gid}; their files are yours")


async def _check_limits(run: _Run, report: _Report) -> None:
    output, _, _ = await run(_CGROUP_READ)
    values = output.split()
    expected = [str(_DOCTOR_LIMITS.memory), str(_DOCTOR_LIMITS.pids)]
    if values != expected:
        report.fail(
            "limits",
            f"the container's cgroup shows memory/pids {values}, expected {expected}",
            "enable the memory and pids cgroup controllers in the kernel and the engine",
        )
        return
    output, code, oom_killed = await run(_MEMORY_HOG)
    if code == 99:
        report.ok("limits", "memory and pids limits are applied (no python3 to test memory)")
    elif oom_killed or code != 0:
        report.ok("limits", "memory and pids limits are applied; a memory hog was stopped")
    else:
        report.fail(
            "limits",
            "a 512 MiB allocation succeeded under a 256 MiB memory limit",
            "enable memory accounting (e.g. cgroup_enable=memory swapaccount=1 on the kernel "
            "command line)",
        )


def _daemon_check(socket_path: Path, report: _Report) -> None:
    try:
        with daemon_client(socket_path, timeout=30) as client:
            response = client.get(f"{API_PREFIX}/health")
    except httpx.TransportError:
        report.note("daemon", not_running_message(socket_path))
        return
    health = read_health(response)
    if health is None:
        report.fail(
            "daemon",
            f"{socket_path} answers HTTP {response.status_code} but not as sandboxd",
            "check what listens on that socket",
        )
        return
    if health.ok:
        report.ok("daemon", f"sandboxd {health.version} on {socket_path} is healthy")
    else:
        report.fail("daemon", f"sandboxd on {socket_path} is unhealthy", "; ".join(health.problems))
