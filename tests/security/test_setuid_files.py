"""Attack: plant a setuid or setgid file on the host through a read-write grant, or use a
device node found in a grant.

The engine has no nosuid/nodev for binds (no Binds mode nor BindOptions field takes them), so
with the daemon running as root a command running as uid 0 could leave a setuid-root file in
the project for the host to run. The container's seccomp profile refuses every way of giving
a file those bits (chmod and its siblings, and open/creat/mknod with them in the mode, an
O_TMPFILE linked in afterwards included; openat2, whose mode a filter cannot read, not at
all), a file capability needs CAP_SETFCAP, which commands lack, and the device cgroup
refuses opening a device node, whoever made it.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import httpx
import pytest

from tests.support.parts import require
from tests.support.sandboxd_harness import Daemon, run_with_paths, short_dir

pytestmark = pytest.mark.docker

PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID

RAW_SYSCALL = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
number, path, mode = int(sys.argv[1]), os.fsencode(sys.argv[2]), int(sys.argv[3], 8)
if number == 452:  # fchmodat2(AT_FDCWD, path, mode, 0), on a file made first
    open(path, "w").close()
    result = libc.syscall(number, -100, path, mode, 0)
elif number == 437:  # openat2(AT_FDCWD, path, {O_CREAT | O_WRONLY, mode, 0}, 24)
    how = (ctypes.c_uint64 * 3)(0o101, mode, 0)
    result = libc.syscall(number, -100, path, ctypes.byref(how), 24)
elif number == 2:  # open(path, O_CREAT | O_WRONLY, mode)
    result = libc.syscall(number, path, 0o101, mode)
else:  # creat(path, mode) or chmod(path, mode) on a file made first
    if number == 90:
        open(path, "w").close()
    result = libc.syscall(number, path, mode)
print("ok" if result >= 0 else os.strerror(ctypes.get_errno()))
"""

PYTHON_PLANTS = {
    "python os.open 0o4755": "os.open(f, os.O_CREAT | os.O_WRONLY, 0o4755)",
    "python os.chmod": "open(f, 'w').close(); os.chmod(f, 0o4755)",
    "python os.fchmod": "os.fchmod(os.open(f, os.O_CREAT | os.O_WRONLY), 0o2755)",
    "mknod regular 04755": "os.mknod(f, stat.S_IFREG | 0o4755)",
    "O_TMPFILE 04755 linked in": (
        "fd = os.open(os.path.dirname(f), os.O_TMPFILE | os.O_WRONLY, 0o4755); "
        "os.link('fd/%d' % fd, f, src_dir_fd=os.open('/proc/self', os.O_RDONLY))"
    ),
}
"""Python's way of each: `f` is the file to plant."""

PLANTS = {
    "chmod u+s": "touch {f} && chmod u+s {f}",
    "chmod g+s": "touch {f} && chmod g+s {f}",
    "chmod 6755": "touch {f} && chmod 6755 {f}",
    "install -m 4755": "install -m 4755 /bin/true {f}",
    "install -m 2755": "install -m 2755 /bin/true {f}",
    "cp --preserve of a setuid file": "cp --preserve=mode /usr/bin/su {f}",
    "cp -a of a setuid file": "cp -a /usr/bin/passwd {f}",
    **{
        name: "python3 -c " + shlex.quote(f"import os, stat, sys; f = sys.argv[1]; {code}") + " {f}"
        for name, code in PYTHON_PLANTS.items()
    },
    "open(2) 04755": "python3 -c {raw} 2 {f} 4755",
    "creat(2) 04755": "python3 -c {raw} 85 {f} 4755",
    "chmod(2) 04755": "python3 -c {raw} 90 {f} 4755",
    "fchmodat2(2) 04755": "python3 -c {raw} 452 {f} 4755",
    "openat2(2) 04755": "python3 -c {raw} 437 {f} 4755",
}


def _run(daemon: Daemon, command: str, project: Path, *, read_only: bool = False) -> str:
    return _stdout(run_with_paths(daemon, command, [(project, read_only)]))


def _stdout(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["error"] is None, body
    return f"{body['stdout']}{body['stderr']}"


@pytest.mark.parametrize("attack", list(PLANTS))
def test_no_setuid_or_setgid_file_lands_in_a_read_write_grant(daemon: Daemon, attack: str) -> None:
    project = short_dir("suid")
    planted = project / "planted"
    command = PLANTS[attack].format(f=shlex.quote(str(planted)), raw=shlex.quote(RAW_SYSCALL))
    said = _run(daemon, command, project)
    if planted.exists():
        mode = planted.stat().st_mode
        assert not mode & PRIVILEGE_BITS, (
            f"{attack} left {stat.filemode(mode)} {planted} on the host: {said}"
        )


HOST_DEVICES = {
    "mem": (stat.S_IFCHR, 1, 1),
    "kmsg": (stat.S_IFCHR, 1, 11),
    "tty1": (stat.S_IFCHR, 4, 1),
    "disk": (stat.S_IFBLK, os.major(os.stat("/").st_dev), os.minor(os.stat("/").st_dev)),
}
"""Device nodes a host user might leave in a project: physical memory, the kernel log, a
console, and the disk this host's root file system is on."""


def _make_devices(project: Path) -> dict[str, Path]:
    require(os.geteuid() == 0, "making device nodes needs root")
    for name, (kind, major, minor) in HOST_DEVICES.items():
        os.mknod(project / name, kind | 0o666, os.makedev(major, minor))
    return {name: project / name for name in HOST_DEVICES}


@pytest.mark.parametrize("read_only", [False, True])
def test_a_device_node_the_host_made_in_a_grant_cannot_be_opened(
    daemon: Daemon, read_only: bool
) -> None:
    project = short_dir("dev")
    devices = _make_devices(project)
    tries = " ".join(
        f"head -c 1 {path} >/dev/null 2>&1 && echo read-{name} || echo no-read-{name}; "
        f"(echo x > {path}) 2>/dev/null && echo wrote-{name} || echo no-write-{name};"
        for name, path in devices.items()
    )
    said = _run(daemon, tries, project, read_only=read_only).split()
    assert said == [f"no-{how}-{name}" for name in devices for how in ("read", "write")]


def test_the_harmless_devices_the_engine_allows_stay_harmless(daemon: Daemon) -> None:
    """The device cgroup lets every container open null, zero, full, (u)random and its tty,
    wherever their nodes are: a host-made null in a grant is only a null device."""
    project = short_dir("dev")
    require(os.geteuid() == 0, "making device nodes needs root")
    os.mknod(project / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    said = _run(daemon, f"echo gone > {project}/null; wc -c < {project}/null", project)
    assert said.strip() == "0"


FILE_CAPABILITY = (
    "import os, struct, sys; f = sys.argv[1]; open(f, 'w').close(); "
    "os.setxattr(f, 'security.capability', struct.pack('<5I', 0x02000001, 1 << 7, 0, 0, 0))"
)
"""A file capability (cap_setuid+ep, revision 2): as good as setuid root to whoever runs it."""


def test_no_file_capability_lands_in_a_read_write_grant(daemon: Daemon) -> None:
    project = short_dir("fcap")
    planted = project / "planted"
    said = _run(daemon, f"python3 -c {shlex.quote(FILE_CAPABILITY)} {planted}", project)
    assert "PermissionError" in said, said
    assert "security.capability" not in os.listxattr(planted)
