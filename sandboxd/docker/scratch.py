"""A sandbox's scratch places (/tmp and $HOME) as engine volumes backed by tmpfs.

WHY volumes rather than the engine's tmpfs mounts: a container's tmpfs mount exists only in
its own mount namespace, so a fork could read it only through a process of that container,
among the processes the session's commands left there. A volume is mounted by the engine,
and another container may mount it too: a fork's copier (sandboxd.docker.fork) mounts the
source's read-only and the forks' read-write, and nothing else.

Each volume is what the tmpfs mount was: the local driver's tmpfs, of the same size, owner
and mode, nosuid and nodev, made empty (no copy of the image's files into it). It is created
with its container (the create names it, with its driver options), named after that
container with a random part of its own (a volume left by an earlier container is never
found again under a new name), and labelled with its container and the daemon that made it
(sandboxd.docker.ownership); the container's `sandboxd.scratch` label names its volumes by
place. The engine removes only a container's anonymous volumes with it: the backend removes
these right after their container (`remove_volumes`), and its orphan sweep removes those
whose container is gone (`doomed_volumes`).
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import docker.errors
import docker.types

from sandboxd.backend import SandboxSpec
from sandboxd.docker.ownership import (
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_STATE,
    OwnerProcess,
    is_orphan,
)

LABEL_SCRATCH = "sandboxd.scratch"
"""On a container: its scratch volumes, a JSON object {place: volume name}."""
LABEL_CONTAINER = "sandboxd.container"
"""On a volume: the name of the container it was made for."""
_VOLUME_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class ScratchVolume:
    place: str
    """Where the container mounts it (/tmp, or $HOME)."""
    name: str
    size: int
    """Bytes (the tmpfs's size)."""
    options: str
    """The tmpfs's mount options but its size: owner and mode."""

    def driver_options(self) -> dict[str, str]:
        return {
            "type": "tmpfs",
            "device": "tmpfs",
            "o": f"size={self.size},{self.options},nosuid,nodev",
        }

    def mount(
        self, labels: Mapping[str, str], target: str | None = None, *, read_only: bool = False
    ) -> docker.types.Mount:
        """The mount of it at `target` (its place), which also creates it, empty, with
        `labels`, if it does not exist (never a volume of another kind)."""
        return docker.types.Mount(
            target or self.place,
            self.name,
            type="volume",
            read_only=read_only,
            no_copy=True,
            labels=dict(labels),
            driver_config=docker.types.DriverConfig("local", self.driver_options()),
        )


def scratch_volumes(
    container: str, spec: SandboxSpec, places: Sequence[str], home: str
) -> tuple[ScratchVolume, ...]:
    """The volumes of container `container`, one per scratch place (`home` is $HOME's)."""
    volumes = []
    for place in places:
        tag = "home" if place == home else place.strip("/").replace("/", "-") or "root"
        name = f"{container}.{tag}.{secrets.token_hex(8)}"
        if place == home:
            size = spec.limits.home
            options = f"uid={spec.uid},gid={spec.gid},mode=700"
        else:
            size = spec.limits.tmp
            options = "mode=1777"
        volumes.append(ScratchVolume(place, name, size, options))
    return tuple(volumes)


def scratch_label(volumes: Iterable[ScratchVolume]) -> str:
    return json.dumps({volume.place: volume.name for volume in volumes}, separators=(",", ":"))


def volumes_in(labels: Mapping[str, str]) -> dict[str, str]:
    """A container's scratch volumes from its labels, {place: name}; {} when it names none
    (or names them in a way no daemon writes)."""
    try:
        named = json.loads(labels.get(LABEL_SCRATCH) or "{}")
    except ValueError:
        return {}
    if not isinstance(named, dict):
        return {}
    return {
        str(place): name
        for place, name in named.items()
        if isinstance(name, str) and _VOLUME_NAME.fullmatch(name)
    }


def remove_volumes(api: Any, names: Iterable[str]) -> None:
    """Remove each (blocking), best effort: one in use, gone already, or an engine that
    fails is left to the next sweep."""
    for name in names:
        with contextlib.suppress(docker.errors.APIError):
            api.remove_volume(name, force=True)


def volume_labels(labels: Mapping[str, str], container: str) -> dict[str, str]:
    """A container's labels as its volumes carry them, with the container's name."""
    return {**labels, LABEL_CONTAINER: container}


def doomed_volumes(
    api: Any,
    containers: Iterable[str],
    spared: Iterable[str],
    instance: str,
    me: OwnerProcess,
    state_id: str | None = None,
) -> list[str]:
    """The managed volumes whose container is none of `containers` (the names that exist)
    nor of `spared` (being created), made by the daemon `instance` (this one), kept in its
    state directory `state_id`, or made by one that is gone, or unknown for long enough (the
    rule of sandboxd.docker.ownership for a container not started yet). One still in use is
    refused by the engine when removed."""
    listed = api.volumes(filters={"label": f"{LABEL_MANAGED}=1"}).get("Volumes") or []
    alive = {name.lstrip("/") for name in containers} | set(spared)
    doomed = []
    for volume in listed:
        labels = volume.get("Labels") or {}
        if labels.get(LABEL_CONTAINER) in alive:
            continue
        ours = labels.get(LABEL_OWNER) == instance
        kept = state_id is not None and labels.get(LABEL_STATE) == state_id
        if ours or kept or is_orphan(labels, "created", me):
            doomed.append(str(volume["Name"]))
    return doomed
