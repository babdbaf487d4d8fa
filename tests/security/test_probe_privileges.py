"""Attack: find or gain a privilege: a capability, a namespace of one's own, a kernel
interface the container's profile should refuse.

Probes: amicontained (capabilities, seccomp, user namespaces), deepce's and CDK's capability
and namespace checks, linPEAS's container section, runc's tests of the default profile.
Every call is made for real; its errno is the refusal.
"""

from __future__ import annotations

import pytest

from tests.support.sandbox_probe import probe, x86_64_only
from tests.support.sandboxd_harness import Daemon

pytestmark = [pytest.mark.docker, x86_64_only]

SESSION = {"session": "probe-privileges"}

STATUS = """
for pid in ["self", *map(str, outside_pids())]:
    with open(f"/proc/{pid}/status") as lines:
        fields = dict(line.rstrip("\\n").split(":\\t", 1) for line in lines if ":\\t" in line)
    print(pid, *(fields[name] for name in sys.argv[1:]))
"""


def test_no_process_has_a_capability_or_may_gain_privileges(daemon: Daemon) -> None:
    """amicontained's and deepce's capability check, for the command and for every process
    it did not start: every capability set empty, no_new_privs set."""
    sets = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"]
    with daemon.client() as client:
        seen = probe(client, STATUS, *sets, **SESSION)
    rows = {row.split()[0]: row.split()[1:] for row in seen.splitlines()}
    assert "self" in rows and "1" in rows, seen
    expected = ["0000000000000000"] * 5 + ["1"]
    assert {pid: row for pid, row in rows.items() if row != expected} == {}, seen


NAMESPACES = {
    "mount": 0x00020000,
    "uts": 0x04000000,
    "ipc": 0x08000000,
    "user": 0x10000000,
    "pid": 0x20000000,
    "network": 0x40000000,
    "cgroup": 0x02000000,
    "time": 0x00000080,
}


CLONE = """
child = libc.syscall(56, ctypes.c_long(int(sys.argv[1]) | 17), *[ctypes.c_long(0)] * 4)
if child == 0:
    os._exit(0)
print("ok" if child > 0 else errno.errorcode[ctypes.get_errno()])
"""


@pytest.mark.parametrize(
    ("namespace", "how"),
    [(name, "unshare") for name in NAMESPACES]
    + [(name, "clone") for name in NAMESPACES if name != "time"],  # clone() cannot say time
)
def test_no_new_namespace(daemon: Daemon, namespace: str, how: str) -> None:
    """CDK's and amicontained's namespace checks: unshare(CLONE_NEW*) or clone() with the
    flag (a user namespace would give back every capability inside it)."""
    flag = NAMESPACES[namespace]
    with daemon.client() as client:
        if how == "unshare":
            outcome = probe(client, f"print(syscall(272, {flag}))", **SESSION)
        else:
            outcome = probe(client, CLONE, str(flag), **SESSION)
    assert outcome == "EPERM", f"{how} of a {namespace} namespace: {outcome}"


def test_no_namespace_of_another_process_can_be_entered(daemon: Daemon) -> None:
    """setns() into PID 1's namespaces (nsenter, the first step of many escapes)."""
    script = """
for kind in sorted(os.listdir("/proc/1/ns")):
    try:
        fd = os.open(f"/proc/1/ns/{kind}", os.O_RDONLY)
    except OSError as exc:
        print(kind, errno.errorcode[exc.errno])
        continue
    print(kind, syscall(308, fd, 0))
"""
    with daemon.client() as client:
        seen = probe(client, script, **SESSION)
    outcomes = dict(line.split() for line in seen.splitlines())
    assert outcomes and set(outcomes.values()) <= {"EPERM", "EACCES"}, outcomes


KERNEL_INTERFACES = {
    "add_key": "syscall(248, b'user', b'probe', b'secret', 6, -2)",
    "keyctl": "syscall(250, 0, -1, 0)",  # KEYCTL_GET_KEYRING_ID of the thread's keyring
    "request_key": "syscall(249, b'user', b'probe', None, 0)",
    "bpf": "syscall(321, 0, ctypes.create_string_buffer(128), 128)",  # BPF_MAP_CREATE
    "perf_event_open": "syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0)",
    "userfaultfd": "syscall(323, 0)",
    "mount": "syscall(165, b'/tmp', b'/tmp', None, 4096, None)",  # MS_BIND
    "chroot": "syscall(161, b'/tmp')",
    "kexec_load": "syscall(246, 0, 0, 0, 0)",
    "init_module": "syscall(175, None, 0, b'')",
    "iopl": "syscall(172, 3)",
    "syslog": "syscall(103, 3, ctypes.create_string_buffer(64), 64)",  # read the kernel log
    "setuid to root": "syscall(105, 0) if os.getuid() else 'EPERM'",  # as root: nothing to gain
}


@pytest.mark.parametrize("call", list(KERNEL_INTERFACES))
def test_kernel_interfaces_the_profile_refuses(daemon: Daemon, call: str) -> None:
    """amicontained's list of blocked system calls: each one an escape or a host leak."""
    with daemon.client() as client:
        outcome = probe(client, f"print({KERNEL_INTERFACES[call]})", **SESSION)
    assert outcome == "EPERM", f"{call}: {outcome}"


def test_commands_belong_to_no_group_but_their_own(daemon: Daemon) -> None:
    """deepce's user check: a supplementary group of the caller's on the host (`docker`,
    `disk`, `sudo`) would come with its rights; a command has only its own gid."""
    script = "print(os.getgid(), *sorted(set(os.getgroups()) - {os.getgid()}))"
    with daemon.client() as client:
        groups = probe(client, script, **SESSION).split()
    assert len(groups) == 1, groups
