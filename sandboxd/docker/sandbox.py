"""One Docker sandbox as its backend holds it: the container, how to reach its supervisor, its
egress, its scratch volumes and what keeps it across a restart of its daemon."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from sandboxd.docker.container import Layout
from sandboxd.docker.records import SandboxRecord
from sandboxd.docker.scratch import ScratchVolume
from sandboxd.docker.supervisor_client import SupervisorChannel
from sandboxd.egress.proxy import EgressProxy
from sandboxd.sessions.table import Sandbox

_MAX_BLOCKED_KEPT = 16
"""Refused connections a sandbox keeps for its commands' results (the audit log has all)."""
KILLED_FROM_OUTSIDE = (
    "its container was killed or removed from outside (`docker kill`/`docker rm`, the engine "
    "restarting, the out-of-memory killer)"
)


@dataclass(eq=False)
class DockerSandbox(Sandbox):
    """One container and how to reach it."""

    container_id: str
    layout: Layout
    control_dir: Path
    channel: SupervisorChannel | None
    """None: the `docker exec` fallback."""
    start_steps: dict[str, float]
    """Seconds each step of its start took (see StartOutcome.steps)."""
    egress: set[anyio.CancelScope] | None = None
    """Its egress connections being served, each cancelled when it is torn down; None: no
    proxy."""
    egress_proxy: EgressProxy | None = None
    blocked: collections.deque[tuple[int, str]] = field(
        default_factory=lambda: collections.deque(maxlen=_MAX_BLOCKED_KEPT)
    )
    """Its proxy's latest refusals, numbered, for the results of the commands that ran
    meanwhile."""
    blocked_count: int = 0
    volumes: tuple[ScratchVolume, ...] = ()
    """Its scratch places' volumes (sandboxd.docker.scratch), removed with it."""
    freezes: int = 0
    """Forks copying it now: it stays frozen (paused) until the last one is done."""
    freeze_lock: anyio.Lock = field(default_factory=anyio.Lock)
    secret: str | None = None
    """What its supervisor proves itself with to a daemon that rejoins it (None: none)."""
    filling: bool = False
    """A fork's sandbox not yet filled with its copy."""

    def usable(self) -> bool:
        # A supervisor that just died is not usable: its backend is retiring its container.
        return super().usable() and (self.channel is None or self.channel.lost_reason is None)

    def stopped_reason(self) -> str | None:
        channel = self.channel
        if channel is None or channel.lost_reason is None:
            return None
        return f"{KILLED_FROM_OUTSIDE} (its supervisor stopped: {channel.lost_reason})"

    def hand_to(self, session: str) -> None:
        super().hand_to(session)
        self.start_steps = {}  # it started ahead of time: this session waited for no step

    def record(self) -> SandboxRecord:
        """What the next daemon needs to take it over."""
        return SandboxRecord.of(
            name=self.name,
            container_id=self.container_id,
            session=self.session,
            spec=self.spec,
            control_dir=self.control_dir.name,
            layout=self.layout,
            volumes=self.volumes,
            supervised=self.channel is not None,
            secret=self.secret,
            created_at=self.created_at,
            filling=self.filling,
        )
