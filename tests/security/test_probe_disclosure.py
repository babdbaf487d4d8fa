"""Attack: learn about the host, the daemon or other sandboxes from inside one.

Probes: linPEAS's and deepce's container enumeration (environment variables, mountinfo,
hostname, the kernel log), CDK's "read the daemon's config or token" checks, and
SandboxEscapeBench's cross-tenant tasks (another sandbox's processes and files).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sandbox_probe import probe
from tests.support.sandboxd_harness import Daemon, running_daemon, short_dir

pytestmark = pytest.mark.docker

HOST_SECRET = "PROBE_HOST_SECRET"
HOST_VALUE = "host-only-7d1e4c"


@pytest.fixture(scope="module")
def daemon_with_secrets(docker_client: Any) -> Iterator[Daemon]:
    """A daemon started from an environment that holds a secret (as a user's shell does)."""
    with running_daemon(docker_client, env={HOST_SECRET: HOST_VALUE}) as serving:
        yield serving


ENVIRONMENTS = """
seen = [f"self:{key}={value}" for key, value in os.environ.items()]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                values = environ.read().decode(errors="replace").split("\\0")
            seen += [f"{pid}:{value}" for value in values]
        except OSError:
            pass
print(*seen, sep="\\n")
"""


def test_the_hosts_environment_reaches_no_process(daemon_with_secrets: Daemon) -> None:
    """linPEAS's env dump, of the command and of every process it may read: the daemon's
    own environment (a user's tokens live there) is in none."""
    with daemon_with_secrets.client() as client:
        seen = probe(client, ENVIRONMENTS)
    assert "self:PATH=" in seen, seen
    assert HOST_VALUE not in seen and HOST_SECRET not in seen, seen


MOUNTINFO = """
with open("/proc/self/mountinfo") as mounts:
    for line in mounts:
        fields = line.split()
        kind, options = fields[fields.index("-") + 1], fields[fields.index("-") + 3]
        if kind in ("proc", "sysfs", "cgroup", "cgroup2", "tmpfs", "devpts", "mqueue"):
            continue  # the kernel's own: their paths are not the host's files
        revealed = [fields[3]] + [
            path for option in options.split(",") if "=" in option
            for path in option.split("=", 1)[1].split(":") if path.startswith("/")
        ]
        for path in revealed:
            if path != "/":
                print(fields[4], path)
"""


def test_mountinfo_reveals_only_the_grants_the_daemons_run_directory_and_the_engine(
    daemon_with_secrets: Daemon, docker_client: Any
) -> None:
    """deepce's and CDK's mountinfo read. What it shows of the host, by design: each grant
    (mounted at its own path), the sandbox's control directory under the daemon's state
    dir, the engine's storage (overlay layers, the container's hostname file) and its init
    binary. Nothing else of the host: no home, no other project, no other sandbox's run
    directory."""
    project = short_dir("info")
    grant = {"allowed_paths": [{"path": str(project), "read_only": True}]}
    with daemon_with_secrets.client() as client:
        seen = probe(client, MOUNTINFO, **grant)
    state = daemon_with_secrets.state_dir
    engine = docker_client.info()["DockerRootDir"]
    allowed = re.compile(
        rf"{re.escape(str(project))} {re.escape(str(project))}"
        rf"|(/\.sandboxd|/etc/hosts) {re.escape(str(state))}/run/[0-9a-f]+(/hosts)?"
        rf"|\S+ {re.escape(engine)}/\S+"
        r"|/usr/sbin/docker-init /\S+"
    )
    assert seen, seen
    assert [line for line in seen.splitlines() if not allowed.fullmatch(line)] == [], seen


def test_the_sandbox_has_a_name_of_its_own(daemon_with_secrets: Daemon) -> None:
    """linPEAS's first line: the hostname is the sandbox's, not the machine's."""
    script = "print(socket.gethostname(), open('/etc/hostname').read().strip())"
    with daemon_with_secrets.client() as client:
        names = probe(client, "import socket\n" + script).split()
    assert names == ["sandbox", "sandbox"] and socket.gethostname() not in names, names


DAEMON_FILES = """
for path in sys.argv[1:]:
    print(path, opened(path, os.O_RDONLY))
for top, _, files in os.walk("/.sandboxd"):
    print(*sorted(files))
"""


def test_the_daemons_state_config_and_audit_log_are_out_of_reach(
    daemon_with_secrets: Daemon,
) -> None:
    """CDK's hunt for the daemon's files: its state dir, config, audit log and socket do not
    open; the sandbox's control directory holds only the supervisor's code and settings."""
    daemon = daemon_with_secrets
    paths = [daemon.state_dir, daemon.root / "sandboxd.toml", daemon.audit_log, daemon.socket]
    with daemon.client() as client:
        seen = probe(client, DAEMON_FILES, *map(str, paths)).splitlines()
    assert [line.split()[-1] for line in seen[: len(paths)]] == ["ENOENT"] * len(paths), seen
    listed = " ".join(seen[len(paths) :])
    assert not re.search(r"audit|toml|token|\.sock\b", listed), listed


def test_another_sandbox_is_invisible(daemon_with_secrets: Daemon, marker: str) -> None:
    """SandboxEscapeBench's cross-tenant task: a second session sees neither the first's
    processes nor its files."""
    first = f"echo mine > /tmp/first-{marker} && (setsid sleep {marker} >/dev/null 2>&1 &)"
    look = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; ls -A /tmp ~"
    with daemon_with_secrets.client() as client:
        made = client.post("/v1/run", json={"command": first, "session": "tenant-a"})
        assert made.status_code == 200 and made.json()["exit_code"] == 0, made.text
        seen = client.post("/v1/run", json={"command": look, "session": "tenant-b"}).json()
    assert "bash" in seen["stdout"], seen
    assert marker not in seen["stdout"], seen["stdout"]


def test_the_kernel_log_is_unreadable(daemon_with_secrets: Daemon) -> None:
    """linPEAS's and deepce's dmesg (kernel addresses, the host's devices and other
    containers' events): refused through syslog(2), /dev/kmsg and /proc/kmsg alike."""
    script = (
        "print(syscall(103, 3, ctypes.create_string_buffer(64), 64),"
        " opened('/dev/kmsg', os.O_RDONLY), opened('/proc/kmsg', os.O_RDONLY))"
    )
    with daemon_with_secrets.client() as client:
        outcome = probe(client, script)
    assert outcome.split() == ["EPERM", "ENOENT", "EPERM"], outcome
