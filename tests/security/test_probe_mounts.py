"""Attack: reach host files beyond the grants: the engine's socket, paths outside the
grants (directly, through /proc/<pid>/root, through a symlink in a grant), the "shocker"
file-handle trick, and writing through a read-only grant, its submounts included.

Probes: deepce's and botb's socket hunt, CDK's mount checks, SandboxEscapeBench's
mount-escape tasks, shocker (open_by_handle_at), runc's tests of read-only binds.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from tests.support.host_mounts import tmpfs_at
from tests.support.sandbox_probe import SYSCALLS, probe, x86_64_only
from tests.support.sandboxd_harness import Daemon, run_with_paths, short_dir

pytestmark = [pytest.mark.docker, x86_64_only]

ENGINE_SOCKETS = [
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/var/run/crio/crio.sock",
    "/run/podman/podman.sock",
]

SOCKET_HUNT = """
import stat
found = [p for p in sys.argv[1:] if os.path.lexists(p)]
for top, dirs, files in os.walk("/", followlinks=False):
    if top in ("/proc", "/sys"):
        dirs.clear()
        continue
    for name in dirs + files:
        path = os.path.join(top, name)
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(path).st_mode) or stat.S_ISSOCK(os.stat(path).st_mode):
                found.append(path)
print("found:", *sorted(set(found)))
"""


def test_no_engine_socket_anywhere(daemon: Daemon) -> None:
    """deepce's and botb's hunt for docker.sock: no socket file in the whole container
    (the supervisor's was removed before any command ran), none at the engines' usual
    places, and a grant holding a symlink to the engine's socket leads nowhere."""
    project = short_dir("mnt")
    (project / "docker.sock").symlink_to("/var/run/docker.sock")
    grant = {"allowed_paths": [{"path": str(project), "read_only": True}]}
    with daemon.client() as client:
        seen = probe(client, "import contextlib\n" + SOCKET_HUNT, *ENGINE_SOCKETS, **grant)
    assert seen == "found:", seen


@pytest.fixture
def secret() -> Path:
    """A host file outside every grant, next to the granted directory."""
    outside = short_dir("sec")
    (outside / "secret.txt").write_text("host secret\n")
    return outside / "secret.txt"


READ_ALL = """
pids = ["self", *map(str, outside_pids())]
for path in sorted({template.format(pid=pid) for template in sys.argv[1:] for pid in pids}):
    try:
        with open(path) as f:
            print(path, "read:", f.read().strip())
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
"""


def test_host_paths_outside_the_grants_are_out_of_reach(daemon: Daemon, secret: Path) -> None:
    """CDK's and SandboxEscapeBench's path tricks: the path itself, through the roots of
    the command's, PID 1's and the supervisor's (/proc/<pid>/root), through `..` from a
    grant, and through absolute and relative symlinks the host left in a grant."""
    project = short_dir("mnt")
    (project / "absolute").symlink_to(secret)
    (project / "relative").symlink_to(os.path.relpath(secret, project))
    tries = [
        str(secret),
        f"/proc/{{pid}}/root{secret}",  # for the command and every process it did not start
        f"{project}/../{secret.parent.name}/{secret.name}",
        f"{project}/absolute",
        f"{project}/relative",
    ]
    grant = {"allowed_paths": [{"path": str(project), "read_only": True}]}
    with daemon.client() as client:
        seen = probe(client, READ_ALL, *tries, **grant)
    assert "host secret" not in seen, seen
    assert all(line.split()[-1] in {"ENOENT", "EACCES"} for line in seen.splitlines()), seen


SHOCKER = """
import struct
# struct file_handle for an ext4 or overlay inode 2 (the root directory): shocker's guess
handle = ctypes.create_string_buffer(struct.pack("<Ii", 8, 1) + struct.pack("<II", 2, 0))
fd = os.open("/etc/hosts", os.O_RDONLY)  # a file the engine bound in from the host's disk
print(syscall(304, fd, handle, os.O_RDONLY))
"""


def test_shocker_open_by_handle_at_is_refused(daemon: Daemon) -> None:
    """shocker (2014): open_by_handle_at from a host-backed bind mount opens any inode of
    that host filesystem, the root directory first."""
    with daemon.client() as client:
        assert probe(client, SHOCKER) == "EPERM"


WRITES = {
    "create a file": "open(f'{grant}/new', 'w')",
    "append to a file": "open(f'{grant}/kept.txt', 'a')",
    "truncate a file": "os.truncate(f'{grant}/kept.txt', 0)",
    "change a mode": "os.chmod(f'{grant}/kept.txt', 0o777)",
    "change the times": "os.utime(f'{grant}/kept.txt', (0, 0))",
    "rename a file": "os.rename(f'{grant}/kept.txt', f'{grant}/moved')",
    "remove a file": "os.unlink(f'{grant}/kept.txt')",
    "make a directory": "os.mkdir(f'{grant}/dir')",
    "make a symlink": "os.symlink('/', f'{grant}/link')",
    "remount read-write": "check(syscall(165, None, grant.encode(), None, 0x1020, None))",
    "write into a submount": "open(f'{grant}/sub/new', 'w')",
}

WRITE = """
def check(outcome):
    if outcome != "ok":
        raise OSError(getattr(errno, outcome), outcome)


grant = sys.argv[1]
try:
    eval(sys.argv[2])
    print("written")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""


@pytest.mark.parametrize("write", list(WRITES))
def test_a_read_only_grant_is_read_only_all_the_way_down(daemon: Daemon, write: str) -> None:
    """runc's read-only bind tests, and issue 33's finding 3: a read-only grant that holds a
    mount point on the host leaves that submount read-only too, or is refused with a 4xx
    naming it."""
    grant = short_dir("ro")
    (grant / "kept.txt").write_text("host\n")
    with tmpfs_at(grant / "sub"):
        before = sorted(str(p.relative_to(grant)) for p in grant.rglob("*"))
        command = shlex.join(["python3", "-c", SYSCALLS + WRITE, str(grant), WRITES[write]])
        response = run_with_paths(daemon, command, [(grant, True)])
        after = sorted(str(p.relative_to(grant)) for p in grant.rglob("*"))
    assert (grant / "kept.txt").read_text() == "host\n" and after == before
    if response.status_code != 200:
        assert 400 <= response.status_code < 500, response.text
        assert str(grant / "sub") in response.json()["error"]["message"], response.text
        return
    outcome = response.json()["stdout"].strip()
    assert outcome in {"EROFS", "EPERM", "EACCES"}, f"{write}: {outcome}"
