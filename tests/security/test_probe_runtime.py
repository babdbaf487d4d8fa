"""Attack: the container runtime's published escapes, tried the way their exploits do.

Probes: runc's own regression tests and SandboxEscapeBench's runtime tasks for
CVE-2019-5736 (overwrite the runtime's binary through /proc/<pid>/exe), CVE-2024-21626
(a descriptor the runtime leaked, a working directory in /proc/self/fd/N), CVE-2022-0492
(a cgroup v1 release_agent of one's own), and deepce's scan of every process's descriptors
for one that leads to the host.
"""

from __future__ import annotations

import pytest

from tests.support.sandbox_probe import probe, x86_64_only
from tests.support.sandboxd_harness import Daemon

pytestmark = [pytest.mark.docker, x86_64_only]

SESSION = {"session": "probe-runtime"}

OVERWRITE_EXES = """
targets = {f"/proc/{pid}/exe" for pid in ["self", *map(str, outside_pids())]}
for pid in ["self", "1"]:
    try:  # PID 1's link does not even resolve for a command (it is not dumpable)
        targets.add(os.path.realpath(f"/proc/{pid}/exe"))
    except PermissionError:
        pass
for path in sorted(targets):
    print(path, opened(path, os.O_WRONLY))
"""


def test_no_processs_binary_can_be_opened_for_writing(daemon: Daemon) -> None:
    """CVE-2019-5736: open /proc/<pid>/exe (the runtime's, PID 1's, the supervisor's, one's
    own) or the file it names for writing, to replace a binary the host runs as root."""
    with daemon.client() as client:
        seen = probe(client, OVERWRITE_EXES, **SESSION)
    outcomes = dict(line.rsplit(" ", 1) for line in seen.splitlines())
    assert "/proc/1/exe" in outcomes, seen
    assert set(outcomes.values()) <= {"ETXTBSY", "EROFS", "EACCES", "EPERM", "ENOENT"}, outcomes


SCAN_DESCRIPTORS = """
leaks = []
for pid in ["self", *map(str, outside_pids())]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue  # not ours to look at: the ptrace probes check that it stays so
    for fd in fds:
        link = f"/proc/{pid}/fd/{fd}"
        try:
            name, opened = os.readlink(link), os.stat(link)
        except OSError:
            continue
        if not name.startswith("/"):
            if name.split(":")[0] not in ("pipe", "anon_inode"):
                leaks.append(f"{pid}:{fd}={name}")
            continue
        try:
            here = os.stat(name)
            same = (here.st_dev, here.st_ino) == (opened.st_dev, opened.st_ino)
        except OSError:
            same = False
        if not same or os.path.isdir(link):
            leaks.append(f"{pid}:{fd}={name}")
print("leaks:", *leaks)
"""


def test_no_process_holds_a_descriptor_that_leads_out(daemon: Daemon) -> None:
    """CVE-2024-21626 and deepce's fd scan: every descriptor of every process a command can
    look at is a pipe, or a file the container itself sees at that name; none is a
    directory (the leaked one was the host's /sys/fs/cgroup), none a socket."""
    with daemon.client() as client:
        assert probe(client, SCAN_DESCRIPTORS, **SESSION) == "leaks:"


CWD_THROUGH_FDS = """
escaped = []
for pid in ["self", "1"]:
    for fd in range(64):
        try:
            os.chdir(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        escaped.append(f"{pid}:{fd}={os.getcwd()}")
print("escaped:", *escaped)
"""


def test_no_working_directory_through_proc_fd(daemon: Daemon) -> None:
    """CVE-2024-21626's other half: `cd /proc/self/fd/N` (or PID 1's) into a directory
    the runtime left open, then `../../..` to the host's root."""
    with daemon.client() as client:
        assert probe(client, CWD_THROUGH_FDS, **SESSION) == "escaped:"


RELEASE_AGENT = """
os.makedirs("/tmp/cgroup", exist_ok=True)
print(syscall(165, b"cgroup", b"/tmp/cgroup", b"cgroup", 0, b"rdma"), end=" ")
print(syscall(272, 0x10000000 | 0x00020000 | 0x02000000))  # a user, mount and cgroup ns
"""


def test_no_cgroup_hierarchy_of_ones_own(daemon: Daemon) -> None:
    """CVE-2022-0492: mount a cgroup v1 hierarchy (directly, or after unshare -UrmC) to
    write its release_agent, which the host's kernel runs as root."""
    with daemon.client() as client:
        assert probe(client, RELEASE_AGENT, **SESSION) == "EPERM EPERM"
