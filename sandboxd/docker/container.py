"""The shape of a sandbox container: hardened defaults, mounts, labels and its main process.

Least privilege unless the spec says otherwise: no network, no capabilities, no privilege
gain, sandboxd's own seccomp profile from the first process (sandboxd.docker.seccomp), the
supervisor as PID 1 (no engine init), read-only root filesystem, memory without swap escape,
a pids ceiling, no core dumps (they would land in a mounted project), and the caller's
uid:gid. Writable places are /tmp and $HOME, each a tmpfs volume of its own
(sandboxd.docker.scratch), plus the read-write mounts.

WHY a sandbox without network has the engine's networking disabled (not only its network
mode "none"): with "none" the engine still builds a network sandbox for the container, and
runs its own binary twice to do it (a start hook that hands it the namespace, and a second
run that turns IPv6 off in it), about 130 ms of CPU for each container, half of what the
engine spends on one. Disabled, the runtime gives the container a network namespace of its
own all the same, holding only its loopback (up, so local servers work); the engine just
writes no /etc/hosts for it, so the sandbox mounts its own (HOSTS).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import math
import os
import py_compile
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import docker.types

import logos.runners.capture
import logos.runners.live
from sandboxd.backend import SandboxSpec, SandboxStartError
from sandboxd.docker.scratch import (
    LABEL_SCRATCH,
    ScratchVolume,
    scratch_label,
    volume_labels,
)
from sandboxd.docker.seccomp import security_option
from sandboxd.egress.proxy import EGRESS_PORT
from sandboxd.inside import egress_forwarder, supervisor

CONTROL_DIR = "/.sandboxd"
"""Inside the container: the supervisor's code, its hosts file and the backend's FIFOs,
mounted read-only."""
_HOME_DIR = "/home/sandbox"
_FALLBACK_HOME_DIR = "/tmp/home"
"""$HOME when a mount covers /home/sandbox's parent (it then lives in the /tmp volume)."""
_TMP_DIR = "/tmp"
HOSTNAME = "sandbox"
_ETC_HOSTS = "/etc/hosts"
_HOSTS_FILE = "hosts"
"""In the control directory: what a sandbox without network sees as /etc/hosts."""
HOSTS = f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{HOSTNAME}\n"
"""localhost (as the engine writes it for a container) and the sandbox's own name: tools
that look either up must not depend on a DNS a sandbox without network cannot reach."""
REJOIN_DIR_MODE = 0o311
"""The control directory's REJOIN_DIR: searchable, never listable, writable by the daemon."""
PYTHON_FLAGS = ("-E", "-s", "-S")
"""Only the standard library and the supervisor's directory on sys.path, fast start."""

SUPERVISOR_MODULE = Path(supervisor.__file__).stem
STAGED_MODULES: tuple[ModuleType, ...] = (
    supervisor,
    egress_forwarder,
    logos.runners.capture,
    logos.runners.live,
)
"""All that runs inside the container: the modules of sandboxd.inside and the two logos
modules they import, copied side by side into its control directory (the import contract
`inside` in pyproject.toml holds them to the standard library)."""
_SUPERVISOR_SOURCES = tuple(Path(inspect.getfile(module)) for module in STAGED_MODULES)
_PROXY_URL = f"http://127.0.0.1:{EGRESS_PORT}"
_PROXY_ENV = {
    **{name: _PROXY_URL for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
    **{name: _PROXY_URL for name in ("http_proxy", "https_proxy", "all_proxy")},
    "NO_PROXY": "localhost,127.0.0.1,::1",
    "no_proxy": "localhost,127.0.0.1,::1",
}
"""A sandbox with an allowlist: every tool that honours these reaches the egress proxy (the
others reach nothing: there is no other way out); its own local servers stay direct."""
_BYTECODE_DIR = "__pycache__"

# The container's first process. With python3 it becomes the supervisor (PID 1); without, it
# exits 3 and the backend falls back to `docker exec` for this image (see
# sandboxd.docker.exec_fallback). WHY `-m` from the control directory: a module's bytecode is
# loaded from __pycache__ (see stage_supervisor), a script's never is.
_SUPERVISED_LAUNCHER = f"""[ -d "$HOME" ] || mkdir -p "$HOME" 2>/dev/null
command -v python3 >/dev/null 2>&1 || exit 3
cd {CONTROL_DIR} || exit 4
exec python3 {" ".join(PYTHON_FLAGS)} -m {SUPERVISOR_MODULE} {CONTROL_DIR}
"""
BEAT_FILE = "beat"
"""In the control directory of a sandbox without a supervisor, kept across restarts: what its
daemon rewrites every BEAT_S; the sandbox ends itself once it stayed the same for its orphan
time (no daemon is there to use it)."""
BEAT_S = 10.0


def _exec_mode_launcher(orphan_ttl_s: float) -> str:
    """The first process of a sandbox without python3 (commands come by `docker exec`): it
    keeps the container up, for ever, or (`orphan_ttl_s`) until its daemon's beat has not
    changed for that long. Shell builtins, `mkdir` and `sleep` only: the image may have
    nothing else."""
    keep_up = "exec sleep 2147483647"
    if orphan_ttl_s > 0:
        periods = max(1, math.ceil(orphan_ttl_s / BEAT_S))
        keep_up = (
            "last=; same=0\n"
            f'while [ "$same" -lt {periods} ]; do\n'
            f"  sleep {BEAT_S:g}\n"
            f"  beat=; read -r beat < {CONTROL_DIR}/{BEAT_FILE} 2>/dev/null\n"
            '  if [ "$beat" = "$last" ]; then same=$((same + 1)); else same=0; last=$beat; fi\n'
            "done"
        )
    return f'[ -d "$HOME" ] || mkdir -p "$HOME" 2>/dev/null\n{keep_up}\n'


MASKED_PATHS = (
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/key-users",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
)
"""Hidden in every sandbox (covered with /dev/null or an empty directory). WHY set here rather
than left to the engine's defaults: those vary between engine versions, and a client that sends
an empty list gets none; /proc/keys shows the host's keyrings and /proc/key-users their
owners' counts, /proc/timer_list and /proc/sched_debug its processes,
/sys/devices/virtual/powercap its energy counters."""
READONLY_PATHS = (
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
)

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Layout:
    """Where the writable scratch places go, given the spec's mounts, and whether the
    sandbox mounts its own /etc/hosts."""

    home: str
    home_scratch: bool
    tmp_scratch: bool
    hosts_file: bool

    @property
    def scratch(self) -> tuple[str, ...]:
        """The scratch places (each a tmpfs volume): what commands can change outside the
        mounts."""
        places = [_TMP_DIR] if self.tmp_scratch else []
        if self.home_scratch:
            places.append(self.home)
        return tuple(places)


def plan_layout(spec: SandboxSpec) -> Layout:
    """The layout; SandboxStartError says why the spec's mounts cannot work (the command's
    error)."""
    targets = [mount.path.rstrip("/") or "/" for mount in spec.mounts]
    for target in targets:
        if paths_overlap(CONTROL_DIR, target):
            raise SandboxStartError(
                f"cannot mount {target}: it would cover {CONTROL_DIR}, which sandboxd reserves "
                "inside the container; mount a more specific directory"
            )
    tmp_scratch = _TMP_DIR not in targets
    # WHY not under a mounted /etc: its mount point would be made in the HOST directory
    # (and that /etc brings its own hosts file).
    hosts_file = not spec.network and not any(is_within(_ETC_HOSTS, t) for t in targets)
    home_parent = os.path.dirname(_HOME_DIR)
    if any(is_within(home_parent, target) for target in targets):
        # WHY: a volume at /home/sandbox on top of a mounted /home would create its mount
        # point in the HOST directory.
        return Layout(
            home=_FALLBACK_HOME_DIR,
            home_scratch=False,
            tmp_scratch=tmp_scratch,
            hosts_file=hosts_file,
        )
    return Layout(
        home=_HOME_DIR,
        home_scratch=_HOME_DIR not in targets,
        tmp_scratch=tmp_scratch,
        hosts_file=hosts_file,
    )


def stage_supervisor(directory: Path) -> None:
    """Copy the supervisor and its capture module into `directory` with their bytecode, once
    per daemon: each sandbox's control directory then links to these files.

    WHY: the control directory is read-only in the container, so its Python compiled the
    supervisor at every start and could keep nothing. Now it loads the bytecode compiled
    here when it is the same Python version as the daemon's (`cpython-311`…), and compiles
    the source as before otherwise. The bytecode is checked against the source's hash.
    Copies, so that an upgrade on disk never mixes versions in a running container.
    """
    bytecode = directory / _BYTECODE_DIR
    for made in (directory, bytecode):
        made.mkdir(mode=0o755, parents=True, exist_ok=True)
        made.chmod(0o755)  # whatever the umask: the container's uid must read them
    for source in _SUPERVISOR_SOURCES:
        target = directory / source.name
        _copy(source, target)
        compiled = importlib.util.cache_from_source(str(target))
        py_compile.compile(
            str(target),
            cfile=compiled,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
        Path(compiled).chmod(0o644)


def install_supervisor(
    directory: Path,
    *,
    mounts: Sequence[str] = (),
    egress: bool = False,
    orphan_ttl_s: float = 0.0,
    staged: Path | None = None,
) -> Path:
    """Put the supervisor and its capture module into `directory`, with the settings it
    needs before any command runs (the mount roots to report, whether to forward to the
    egress proxy, how long to wait for a daemon once the backend is gone) and the directory
    a daemon rejoins it through; returns the script.

    From `staged` (see stage_supervisor) as hard links, copies where a link cannot be made;
    without it, copies of the sources.
    """
    if staged is None:
        for source in _SUPERVISOR_SOURCES:
            _copy(source, directory / source.name)
    else:
        (directory / _BYTECODE_DIR).mkdir(mode=0o755)
        (directory / _BYTECODE_DIR).chmod(0o755)
        for source in [*staged.iterdir(), *(staged / _BYTECODE_DIR).iterdir()]:
            if source.is_file():
                _link(source, directory / source.relative_to(staged))
    settings = directory / supervisor.SETTINGS_FILE
    settings.write_text(
        json.dumps(
            {
                "mounts": list(mounts),
                "egress_port": EGRESS_PORT if egress else None,
                "orphan_ttl_s": orphan_ttl_s,
            }
        )
    )
    settings.chmod(0o644)
    rejoin = directory / supervisor.REJOIN_DIR
    rejoin.mkdir()
    # WHY 0311: the sandbox may look names up in it, never list it (its read-only mount
    # forbids changing that); the daemon makes a new channel's FIFOs in it.
    rejoin.chmod(REJOIN_DIR_MODE)
    return directory / Path(supervisor.__file__).name


def write_beat(directory: Path, beat: int) -> None:
    """Its daemon's beat (see BEAT_FILE), replaced whole: the sandbox never reads half."""
    temporary = directory / f".{BEAT_FILE}"
    temporary.write_text(str(beat))
    temporary.chmod(0o644)
    os.replace(temporary, directory / BEAT_FILE)


def remove_control_dir(directory: Path) -> None:
    """Remove a sandbox's control directory, its REJOIN_DIR (which not even its owner may
    list until it is opened up) included."""
    with contextlib.suppress(OSError):
        (directory / supervisor.REJOIN_DIR).chmod(0o700)
    shutil.rmtree(directory, ignore_errors=True)


def write_hosts_file(directory: Path) -> None:
    """The /etc/hosts a sandbox without network mounts (see HOSTS), into its control
    directory."""
    hosts = directory / _HOSTS_FILE
    hosts.write_text(HOSTS)
    hosts.chmod(0o644)


def _copy(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    target.chmod(0o644)


def _link(source: Path, target: Path) -> None:
    """A hard link: no copy per sandbox (the control directory is mounted read-only)."""
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed: a copy does the same
        _copy(source, target)


def container_name(session: str, token: str) -> str:
    slug = _NAME_UNSAFE.sub("-", session)[:24].strip("-._") or "session"
    return f"sandboxd-{slug}-{token}"


def create_container(
    api: Any,
    *,
    name: str,
    spec: SandboxSpec,
    layout: Layout,
    labels: Mapping[str, str],
    control_dir: str,
    supervised: bool,
    volumes: Sequence[ScratchVolume],
    orphan_ttl_s: float = 0.0,
) -> str:
    """Create (not start) the container, and its scratch `volumes` with it; returns its id.
    `orphan_ttl_s`: how long one without a supervisor outlives its daemon's beat (see
    exec_mode_launcher). Blocking: run on the worker pool."""
    limits = spec.limits
    scratch = [volume.mount(volume_labels(labels, name)) for volume in volumes]
    mounts = bind_mounts(spec, layout, control_dir, api_version=str(api.api_version))
    host_config = api.create_host_config(
        mounts=[*scratch, *mounts],
        network_mode="bridge" if spec.network else "none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges", security_option(unix_sockets=spec.unix_sockets)],
        read_only=True,
        # WHY no engine init for a supervised sandbox: the supervisor is PID 1 and reaps;
        # the engine's init would be a process every command could read and trace
        # (sandboxd.inside.supervisor). Without python3 there is no supervisor to be PID 1.
        init=not supervised,
        pids_limit=limits.pids,
        mem_limit=limits.memory,
        memswap_limit=limits.memory,
        nano_cpus=int(usable_cpus(limits.cpus) * 1e9),
        ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
        auto_remove=False,
    )
    # docker-py has no arguments for these; the engine API takes them (API 1.30+).
    host_config["MaskedPaths"] = list(MASKED_PATHS)
    host_config["ReadonlyPaths"] = list(READONLY_PATHS)
    launcher = _SUPERVISED_LAUNCHER if supervised else _exec_mode_launcher(orphan_ttl_s)
    created = api.create_container(
        spec.image,
        entrypoint=["/bin/sh", "-c", launcher, "sandboxd"],
        command=[],
        user=f"{spec.uid}:{spec.gid}",
        environment={
            "HOME": layout.home,
            "TMPDIR": _TMP_DIR,
            **(_PROXY_ENV if spec.allowed_hosts else {}),
        },
        labels={**labels, LABEL_SCRATCH: scratch_label(volumes)},
        name=name,
        hostname=HOSTNAME,
        network_disabled=not spec.network,
        working_dir="/",
        host_config=host_config,
        # WHY: the daemon user's ~/.docker proxy settings must not leak into sandboxes.
        use_config_proxy=False,
    )
    return str(created["Id"])


_RECURSIVE_READ_ONLY_API = (1, 44)
"""The first engine API whose binds can be read-only all the way down (ReadOnlyForceRecursive);
older engines ignore the option without a word, so it is only sent to newer ones."""


def bind_mounts(
    spec: SandboxSpec, layout: Layout, control_dir: str, *, api_version: str
) -> list[docker.types.Mount]:
    """The container's binds: its control directory, the spec's mounts, its /etc/hosts.

    A read-only bind is read-only for every mount beneath it: recursively where the engine
    can do it, and in any case because the policy lists each mount point under a read-only
    grant as a read-only mount of its own (sandboxd.policy), bound on top of the first.
    WHY no nosuid/nodev: no field of this API takes them for a bind (the engine refuses
    them as Binds modes and has no BindOptions for them); the container's seccomp profile
    refuses making setuid/setgid files, and its device cgroup refuses opening device nodes.
    """
    recursive = _api_at_least(api_version, _RECURSIVE_READ_ONLY_API)
    binds = [
        _bind(CONTROL_DIR, control_dir, read_only=True, recursive=recursive),
        *(_bind(m.path, m.path, read_only=m.read_only, recursive=recursive) for m in spec.mounts),
    ]
    if layout.hosts_file:
        hosts = os.path.join(control_dir, _HOSTS_FILE)
        binds.append(_bind(_ETC_HOSTS, hosts, read_only=True, recursive=recursive))
    return binds


def _bind(target: str, source: str, *, read_only: bool, recursive: bool) -> docker.types.Mount:
    mount = docker.types.Mount(target, source, type="bind", read_only=read_only)
    if read_only and recursive:
        mount["BindOptions"] = {"ReadOnlyForceRecursive": True}
    return mount


def _api_at_least(version: str, wanted: tuple[int, int]) -> bool:
    try:
        found = tuple(int(part) for part in version.split("."))
    except ValueError:
        return False
    return found >= wanted


def usable_cpus(requested: float) -> float:
    """The engine refuses more CPUs than the machine has; a ceiling above that means none."""
    available = os.cpu_count() or 1
    return min(requested, float(available))


def is_within(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def paths_overlap(path: str, other: str) -> bool:
    """Whether one holds the other (or they are the same): files in one are in both."""
    return is_within(path, other) or is_within(other, path)
