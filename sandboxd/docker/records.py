"""What a daemon keeps on disk of each sandbox, so that the next daemon on its state directory
can take the sandbox over (sandboxd.docker.keeping).

One file per sandbox under `<state_dir>/sandboxes/`, named after its container, 0600 in a
0700 directory, replaced whole (a temporary file, fsync, rename): a daemon killed at any
moment leaves either the old record or the new one, never half of one. A record holds the
sandbox's spec as the policy checked it (each mount's pinned device and inode), where its
control directory and scratch volumes are, and the secret its supervisor proves itself with
(sandboxd.inside.supervisor: only this daemon's successors can reach it again).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from logos.jsonl import replace_private_file
from sandboxd.backend import Limits, Mount, SandboxSpec
from sandboxd.docker.container import Layout
from sandboxd.docker.scratch import ScratchVolume
from sandboxd.policy.pinned import FileIdentity

_RECORDS_DIR = "sandboxes"
"""Under the state directory."""
SUFFIX = ".json"

logger = logging.getLogger(__name__)

_STRICT = ConfigDict(extra="forbid", frozen=True)


class MountRecord(BaseModel):
    model_config = _STRICT

    path: str
    read_only: bool
    device: int
    inode: int
    kind: Literal["directory", "file", "other"]


class VolumeRecord(BaseModel):
    model_config = _STRICT

    place: str
    name: str
    size: int
    options: str


class SandboxRecord(BaseModel):
    """One sandbox, as its daemon made it."""

    model_config = _STRICT

    format: Literal[1] = 1
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """The container's name (and the record's file name)."""
    container_id: str
    session: str
    """The backend's session it belongs to (a warm sandbox's is the pool's)."""
    image: str
    mounts: tuple[MountRecord, ...]
    network: bool
    uid: int
    gid: int
    limits: Limits
    unix_sockets: bool
    allowed_hosts: tuple[str, ...]
    reclaimable: bool
    control_dir: str
    """Its name under the state directory's `run`."""
    home: str
    home_scratch: bool
    tmp_scratch: bool
    hosts_file: bool
    volumes: tuple[VolumeRecord, ...]
    supervised: bool
    """Whether a supervisor runs its commands (else `docker exec` does)."""
    secret: str | None
    """What its supervisor proves itself with (None: it gave none, and cannot be rejoined)."""
    created_at: float
    filling: bool = False
    """A fork's sandbox not yet filled with its copy: nobody was given it yet."""

    def spec(self) -> SandboxSpec:
        mounts = tuple(
            Mount(m.path, m.read_only, FileIdentity(m.device, m.inode, m.kind)) for m in self.mounts
        )
        return SandboxSpec(
            image=self.image,
            mounts=mounts,
            network=self.network,
            uid=self.uid,
            gid=self.gid,
            limits=self.limits,
            unix_sockets=self.unix_sockets,
            allowed_hosts=self.allowed_hosts,
            reclaimable=self.reclaimable,
        )

    def layout(self) -> Layout:
        return Layout(self.home, self.home_scratch, self.tmp_scratch, self.hosts_file)

    def scratch(self) -> tuple[ScratchVolume, ...]:
        return tuple(ScratchVolume(v.place, v.name, v.size, v.options) for v in self.volumes)

    @classmethod
    def of(
        cls,
        *,
        name: str,
        container_id: str,
        session: str,
        spec: SandboxSpec,
        control_dir: str,
        layout: Layout,
        volumes: tuple[ScratchVolume, ...],
        supervised: bool,
        secret: str | None,
        created_at: float,
        filling: bool,
    ) -> SandboxRecord:
        return cls(
            name=name,
            container_id=container_id,
            session=session,
            image=spec.image,
            mounts=tuple(
                MountRecord(
                    path=m.path,
                    read_only=m.read_only,
                    device=m.identity.device,
                    inode=m.identity.inode,
                    kind=m.identity.kind,
                )
                for m in spec.mounts
            ),
            network=spec.network,
            uid=spec.uid,
            gid=spec.gid,
            limits=spec.limits,
            unix_sockets=spec.unix_sockets,
            allowed_hosts=spec.allowed_hosts,
            reclaimable=spec.reclaimable,
            control_dir=control_dir,
            home=layout.home,
            home_scratch=layout.home_scratch,
            tmp_scratch=layout.tmp_scratch,
            hosts_file=layout.hosts_file,
            volumes=tuple(
                VolumeRecord(place=v.place, name=v.name, size=v.size, options=v.options)
                for v in volumes
            ),
            supervised=supervised,
            secret=secret,
            created_at=created_at,
            filling=filling,
        )


class RecordStore:
    """The records of one state directory's sandboxes. Blocking: call it on a thread."""

    def __init__(self, state_dir: Path) -> None:
        self.directory = Path(state_dir) / _RECORDS_DIR

    def save(self, record: SandboxRecord) -> None:
        replace_private_file(self._path(record.name), record.model_dump_json())

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()

    def load(self) -> list[SandboxRecord]:
        """Every record that can be read; one that cannot is logged and set aside (renamed
        `.unreadable`), so that it neither stops the daemon nor is read again."""
        try:
            entries = sorted(self.directory.iterdir())
        except FileNotFoundError:
            return []
        records = []
        for entry in entries:
            if entry.suffix != SUFFIX or entry.name.startswith("."):
                continue
            try:
                records.append(SandboxRecord.model_validate_json(entry.read_bytes()))
            except (OSError, ValidationError) as exc:
                logger.warning("cannot read the sandbox record %s (%s): set aside", entry, exc)
                with contextlib.suppress(OSError):
                    os.replace(entry, entry.with_suffix(".unreadable"))
        return records

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}{SUFFIX}"
