"""Copy what a sandbox's commands changed outside its mounts into other sandboxes (a fork).

The root filesystem is read-only, so a sandbox's own state is its scratch places (/tmp and
$HOME), each a tmpfs volume (sandboxd.docker.scratch); the mounts are host paths the forks
mount themselves, never copied.

The source is not trusted, and the daemon interprets nothing it wrote. While it is copied it
is frozen whole by the cgroup freezer (the engine's pause, see DockerBackend.fork): none of
its processes runs, whatever signals or timers they set up (a stopped process can be
continued, a frozen one cannot thaw itself), and none is made. The copy is made by a
one-shot copier container running sandboxd.inside.copier, hardened as a sandbox is (every
capability dropped, no privilege gain, sandboxd's seccomp profile, read-only root, no
network, pids, CPU and memory limits, the session's uid:gid, a timeout) and mounting no host
path at all: only the source's scratch volumes, read-only, and each fork's, read-write. It
copies files (holes kept), directories and symlinks (as links, never followed), drops
setuid and setgid bits, leaves out FIFOs, sockets and devices, and the entries where the
source or the forks mount a host path. So nothing the source's tree holds (names, links,
holes, depth, counts) reaches a host directory, and a hostile tree costs the copier its own
bounded time and memory: the daemon only creates it, waits for its end off the event loop
and reads at most MAX_ERROR_BYTES of what it said.

The copier's image is the daemon's configured one: it has python3 (`sandboxd build-image`
makes it so), whatever the session's image is (an image without python3 runs its commands
with `docker exec`, sandboxd.docker.exec_fallback), and one program behaves the same for
every session. When the daemon's image turned out to lack python3, the source's is used if
its sandbox is supervised (it has python3); otherwise the fork is refused, saying why.

Memory: a tmpfs page is charged to the memory cgroup of the process that first writes it, so
the pages the copier writes into the forks' volumes are the copier's, and stay charged to its
cgroup (once removed, kept under the engine's parent cgroup) until the fork's volume frees
them: they count against no fork's memory limit (its volume's size bounds them). The
copier's limit is therefore sized from what it may write: every fork's scratch sizes, a
quarter more for the inodes and directory entries of small files, and COPIER_MEMORY_BASE for
itself.
"""

from __future__ import annotations

import functools
import json
import math
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.types
import requests.exceptions

from sandboxd.docker.container import MASKED_PATHS, READONLY_PATHS, is_within, usable_cpus
from sandboxd.docker.scratch import ScratchVolume
from sandboxd.docker.seccomp import security_option
from sandboxd.inside import copier

COPY_TIMEOUT_S = 300.0
"""A copier still running then is killed, and the fork fails."""
_WAIT_SLICE_S = 30.0
"""Each wait for the copier's end lasts at most this (the engine client's timeout is longer)."""
COPIER_MEMORY_BASE = 64 * 1024**2
"""The copier's own memory (its Python, its walk's stack and descriptors), on top of what it
writes."""
_COPIER_PIDS = 16
_MAX_ERROR_BYTES = 4096
FROM = "/from"
_INTO = "/into"

LABEL_ROLE = "sandboxd.role"
COPIER_ROLE = "copier"


class ForkCopyError(Exception):
    """The copy failed; the message says why."""


@dataclass(frozen=True)
class PlaceCopy:
    """One scratch place of the source, into the forks that have it too."""

    source: ScratchVolume
    targets: tuple[ScratchVolume, ...]
    skip: tuple[str, ...]
    """Entries at its top left out: where the source or the forks mount a host path."""


@dataclass(frozen=True)
class CopyPlan:
    places: tuple[PlaceCopy, ...]
    user: str
    """uid:gid the copier runs as (the session's)."""
    cpus: float
    """Its CPU limit: the forks' own shares (each fork's copy used to run in its own
    sandbox), at most the machine's."""
    memory: int
    """The copier's memory limit, swap included (see the module's docstring)."""


def plan_copy(
    source: Sequence[ScratchVolume],
    forks: Sequence[Sequence[ScratchVolume]],
    *,
    mounts: Sequence[str],
    user: str,
    cpus: float,
) -> CopyPlan:
    """The copy of each of the source's scratch volumes into the forks that have one at the
    same place (a fork that mounts a host path there, or above, gets none of it); `mounts`:
    what the source and the forks mount; `cpus`: a sandbox's CPU limit."""
    places = []
    written = 0
    forks_cpus = usable_cpus(cpus * max(1, len(forks)))
    for volume in source:
        targets = tuple(theirs for fork in forks for theirs in fork if theirs.place == volume.place)
        if not targets:
            continue
        written += sum(target.size for target in targets)
        places.append(PlaceCopy(volume, targets, _entries_holding(volume.place, mounts)))
    return CopyPlan(
        tuple(places),
        user,
        forks_cpus,
        memory=COPIER_MEMORY_BASE + written + written // 4,
    )


def _entries_holding(place: str, mounts: Sequence[str]) -> tuple[str, ...]:
    """The entries at the top of `place` that are, or hold, one of `mounts`."""
    names = set()
    for mount in mounts:
        if mount != place and is_within(mount, place):
            names.add(mount[len(place.rstrip("/")) + 1 :].split("/")[0])
    return tuple(sorted(names))


@functools.cache
def _copier_source() -> str:
    return Path(copier.__file__).read_text(encoding="utf-8")


def create_copier(
    api: Any, plan: CopyPlan, *, image: str, name: str, labels: Mapping[str, str]
) -> str:
    """Create (not start) the copier container; its id. Blocking."""
    mounts: list[docker.types.Mount] = []
    places = []
    for index, place in enumerate(plan.places):
        source_at = f"{FROM}/{index}"
        mounts.append(place.source.mount(labels, source_at, read_only=True))
        targets_at = []
        for number, target in enumerate(place.targets):
            targets_at.append(f"{_INTO}/{index}/{number}")
            mounts.append(target.mount(labels, targets_at[-1]))
        places.append(
            {
                "source": source_at,
                "targets": targets_at,
                "skip": list(place.skip),
                "name": place.source.place,
            }
        )
    host_config = api.create_host_config(
        mounts=mounts,
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges", security_option()],
        read_only=True,
        pids_limit=_COPIER_PIDS,
        mem_limit=plan.memory,
        memswap_limit=plan.memory,
        nano_cpus=int(plan.cpus * 1e9),
        ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
        auto_remove=False,
    )
    host_config["MaskedPaths"] = list(MASKED_PATHS)
    host_config["ReadonlyPaths"] = list(READONLY_PATHS)
    workers = max(1, math.ceil(plan.cpus))
    plan_text = json.dumps({"places": places, "workers": workers}, separators=(",", ":"))
    created = api.create_container(
        image,
        entrypoint=["python3", "-I", "-S", "-B", "-c", _copier_source(), plan_text],
        command=[],
        user=plan.user,
        environment={},
        labels={**labels, LABEL_ROLE: COPIER_ROLE},
        name=name,
        hostname="copier",
        network_disabled=True,
        working_dir="/",
        host_config=host_config,
        use_config_proxy=False,
    )
    return str(created["Id"])


def copier_name() -> str:
    return f"sandboxd-copier-{secrets.token_hex(6)}"


def await_copier(api: Any, container_id: str) -> None:
    """Until the started copier ends (blocking); raises ForkCopyError when it failed, ran out
    of memory or took over COPY_TIMEOUT_S (it is then killed)."""
    timeout_s = COPY_TIMEOUT_S
    status = _wait(api, container_id, timeout_s)
    if status is None:
        api.kill(container_id)
        raise ForkCopyError(f"the copy took over {timeout_s:.0f} s and was stopped")
    if status == 0:
        return
    state = api.inspect_container(container_id)["State"]
    if state.get("OOMKilled"):
        raise ForkCopyError(
            "the copy ran out of memory (its limit is the forks' scratch sizes and a quarter "
            "more): remove what the forks need not get from the session's /tmp and $HOME, "
            "then fork again"
        )
    said = bytes(api.logs(container_id, stdout=False, stderr=True, tail=20))
    text = said[-_MAX_ERROR_BYTES:].decode(errors="replace").strip() or f"status {status}"
    raise ForkCopyError(text)


def _wait(api: Any, container_id: str, timeout_s: float) -> int | None:
    """The copier's exit status, or None once `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        began = time.monotonic()
        try:
            return int(api.wait(container_id, timeout=min(left, _WAIT_SLICE_S))["StatusCode"])
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            # A wait that timed out (docker-py says so either way); one that failed at once
            # is an engine that does not answer: the caller's engine lane reports it.
            if time.monotonic() - began < min(left, _WAIT_SLICE_S) / 2:
                raise
