"""How a Docker backend keeps its sandboxes across restarts of its daemon, and what it tells
the sessions whose sandbox did not make it.

A daemon that keeps its sandboxes labels each with its state directory's id
(sandboxd.docker.ownership.LABEL_STATE) and records it there (sandboxd.docker.records).
When it stops (or is killed), its sandboxes go on: a supervised one's supervisor kills the
commands nobody waits for, keeps the jobs, and waits `orphan_ttl_s` for a daemon
(sandboxd.inside.supervisor); one without a supervisor (`docker exec` mode) ends itself once
its daemon has not rewritten its beat file (sandboxd.docker.container.BEAT_FILE) for that
long. The next daemon on the same state directory takes each over (the Docker backend's
`_adopt`), once the policy it was started with still allows its spec (`vet`) and its mounts
still show what was pinned; the others are removed, and their sessions told why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandboxd.backend import SandboxSpec
from sandboxd.docker.records import RecordStore
from sandboxd.sessions.lost import LostSessions

SpecCheck = Callable[[SandboxSpec], str | None]
"""Why the daemon's policy no longer allows a sandbox of this spec, or None (blocking: it
looks at the host's paths)."""


@dataclass(frozen=True)
class Keeping:
    """What a backend keeps its sandboxes with."""

    state_id: str
    """Its state directory's id, on every sandbox it keeps."""
    records: RecordStore
    lost: LostSessions
    orphan_ttl_s: float
    """How long a sandbox waits for a daemon once its own is gone."""
    vet: SpecCheck


def stopped_reason(state: Mapping[str, Any], orphan_ttl_s: float, orphaned_exit: int) -> str:
    """Why a kept sandbox's container was found stopped, from the engine's `State`."""
    code = state.get("ExitCode")
    if code == orphaned_exit:
        return (
            "it ended itself after waiting for a daemon for its orphan time "
            f"({orphan_ttl_s:g} s when it was made): no sandbox daemon came back in time"
        )
    if state.get("OOMKilled"):
        return "its container was stopped by the out-of-memory killer while no daemon ran"
    return (
        f"its container was stopped while no daemon ran (exit status {code}): the engine "
        "restarted, the host rebooted, or it was stopped from outside (`docker stop`/`kill`)"
    )


GONE_REASON = (
    "its container was removed while no daemon ran (`docker rm`, an engine reset, or another "
    "sandboxd on the engine sweeping it once it had stopped)"
)
