"""Attack: reach the host's hardware or kernel memory through device files.

Probes: deepce's and CDK's device checks (a host disk under /dev to mount or read raw, the
mknod-a-block-device trick), linPEAS's /dev/mem, /dev/kmem and /dev/kmsg reads,
amicontained's device listing.
"""

from __future__ import annotations

import pytest

from tests.support.sandbox_probe import probe, x86_64_only
from tests.support.sandboxd_harness import Daemon

pytestmark = [pytest.mark.docker, x86_64_only]

SESSION = {"session": "probe-devices"}

HARMLESS = {
    "console", "core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm",
    "stderr", "stdin", "stdout", "tty", "urandom", "zero",
}  # fmt: skip
"""What the engine gives every container: no device of the host's beyond these."""

LIST_DEVICES = """
import stat
kinds = []
for top, dirs, files in os.walk("/dev"):
    for name in files + dirs:
        mode = os.lstat(os.path.join(top, name)).st_mode
        if stat.S_ISBLK(mode):
            kinds.append(f"block:{os.path.join(top, name)}")
print(*sorted(os.listdir("/dev")), "|", *kinds)
"""


def test_dev_holds_no_host_device(daemon: Daemon) -> None:
    """deepce's and amicontained's /dev listing: no disk, no memory, no kernel log device,
    no block device anywhere under /dev."""
    with daemon.client() as client:
        names, blocks = probe(client, LIST_DEVICES, **SESSION).split("|")
    assert set(names.split()) <= HARMLESS, names
    assert blocks.split() == [], blocks


DEVICES = {
    "a host disk (8:0, sda)": (0o060000, 8, 0),
    "a virtio disk (254:0)": (0o060000, 254, 0),
    "/dev/mem (1:1)": (0o020000, 1, 1),
    "/dev/kmsg (1:11)": (0o020000, 1, 11),
}

MKNOD_AND_OPEN = """
kind, major, minor = (int(value) for value in sys.argv[1:])
device = "/dev/shm/probe-device" if os.access("/dev/shm", os.W_OK) else "/tmp/probe-device"
print(syscall(133, device.encode(), kind | 0o600, os.makedev(major, minor)), end=" ")
print(opened(device, os.O_RDONLY) if os.path.exists(device) else "absent")
"""


@pytest.mark.parametrize("device", list(DEVICES))
def test_no_device_can_be_made_or_opened(daemon: Daemon, device: str) -> None:
    """CDK's mknod trick: make the device node of a host disk, /dev/mem or /dev/kmsg in a
    writable place and open it."""
    kind, major, minor = DEVICES[device]
    with daemon.client() as client:
        outcome = probe(client, MKNOD_AND_OPEN, str(kind), str(major), str(minor), **SESSION)
    assert outcome == "EPERM absent", f"{device}: {outcome}"


@pytest.mark.parametrize("path", ["/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/vda"])
def test_kernel_memory_and_log_devices_do_not_open(daemon: Daemon, path: str) -> None:
    """linPEAS's reads of kernel memory and the kernel log through their usual names."""
    with daemon.client() as client:
        outcome = probe(client, f"print(opened({path!r}, os.O_RDONLY))", **SESSION)
    assert outcome == "ENOENT", f"{path}: {outcome}"
