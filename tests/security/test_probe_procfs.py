"""Attack: change the host through /proc and /sys, or read what they say about it.

Probes: CDK's and deepce's kernel-knob escapes (core_pattern, modprobe, uevent_helper,
binfmt_misc, sysrq-trigger, the cgroup v1 release_agent and notify_on_release that
CVE-2022-0492 abused, CDK's rewrite-cgroup-devices), linPEAS's panic knobs, and linPEAS's
and amicontained's host-information reads (kcore, kmsg, keys and key users, timers,
scheduler, kallsyms, firmware, debugfs, tracefs).
"""

from __future__ import annotations

import pytest

from tests.support.sandbox_probe import probe
from tests.support.sandboxd_harness import Daemon

pytestmark = pytest.mark.docker

SESSION = {"session": "probe-procfs"}

KNOBS = [
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/kernel/hostname",
    "/proc/sys/kernel/sysrq",
    "/proc/sys/kernel/panic_on_oops",
    "/proc/sys/vm/panic_on_oom",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/fs/binfmt_misc/register",
    "/proc/sysrq-trigger",
    "/sys/kernel/uevent_helper",
    "/sys/power/state",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    "/sys/fs/cgroup/pids/pids.max",
    "/sys/fs/cgroup/devices/devices.allow",
    "/sys/fs/cgroup/{controller}/release_agent",
    "/sys/fs/cgroup/{controller}/notify_on_release",
    "/sys/fs/cgroup/{controller}/cgroup.procs",
    "/proc/self/oom_score_adj",
]

WRITE_EACH = """
controllers = sorted(os.listdir("/sys/fs/cgroup")) if os.path.isdir("/sys/fs/cgroup") else []
paths = {p.format(controller=c) for p in sys.argv[1:] for c in controllers or [""]}
for path in sorted(paths):
    value = b"-1000\\n" if path.endswith("oom_score_adj") else b"|/tmp/x\\n"
    try:
        with open(path, "wb", buffering=0) as knob:
            knob.write(value)
        print(path, "written")
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
"""


@pytest.mark.parametrize("knob", KNOBS)
def test_kernel_knobs_cannot_be_written(daemon: Daemon, knob: str) -> None:
    """Each knob written for real (a core_pattern or release_agent pointing at a file of
    the sandbox runs it as root on the host); absent, read-only or refused are all fine."""
    with daemon.client() as client:
        seen = probe(client, WRITE_EACH, knob, **SESSION)
    outcomes = dict(line.rsplit(" ", 1) for line in seen.splitlines())
    refused = {"ENOENT", "ENOTDIR", "EROFS", "EACCES", "EPERM"}
    assert outcomes and set(outcomes.values()) <= refused, outcomes


READ_EACH = """
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
        continue
    if path.endswith("kallsyms"):  # its addresses are what leaks: hidden, they read zero
        data = b"".join(line.split()[0].strip(b"0") for line in data.splitlines()[:1000])
    print(path, "read", len(data), "bytes")
"""

HOST_FILES = [
    "/proc/kcore",
    "/proc/kmsg",
    "/proc/keys",
    "/proc/key-users",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/kallsyms",
    "/sys/firmware/efi/efivars",
    "/sys/kernel/debug/kprobes/list",
    "/sys/kernel/security/lsm",
    "/sys/kernel/tracing/trace",
]


@pytest.mark.parametrize("path", HOST_FILES)
def test_files_that_describe_the_host_read_nothing(daemon: Daemon, path: str) -> None:
    """linPEAS's and amicontained's reads: absent, refused or empty."""
    with daemon.client() as client:
        seen = probe(client, READ_EACH, path, **SESSION)
    assert seen.split()[-1] in {"ENOENT", "EACCES", "EPERM", "EISDIR"} or seen.endswith(
        "read 0 bytes"
    ), seen
