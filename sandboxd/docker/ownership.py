"""Which daemon owns a container, and what a daemon does with the containers it finds.

Rule (two daemons may share one engine, e.g. on two sockets): every container records the
process that created it — kernel boot id, pid namespace, pid and the pid's start time — and,
when its daemon keeps sandboxes across restarts, its state directory's id (LABEL_STATE). A
daemon finding a managed container (`disposition`):
  * one it created itself is its own ("ours");
  * one labelled with its own state directory's id is one it takes over from the daemon
    before it, or removes (sandboxd.docker.keeping: "kept");
  * one kept by another state directory's daemon outlives that daemon by design, and
    records no owner process (its maker's end is not its own): while it runs (or is frozen
    by a fork) it is left alone (its supervisor ends it within its orphan time when no
    daemon comes back); stopped, it is left to its own daemon for KEPT_STOPPED_GRACE_S
    (which, coming back, tells its session why the sandbox stopped), then swept;
  * any other is an orphan, which any daemon may sweep, when
      - its owner ran in our boot and our pid namespace, and that exact process (pid AND
        start time, so a recycled pid does not count) is gone; or
      - we cannot see its owner (another boot, another pid namespace, a missing label) and
        the container is not running (a live owner's containers run: their supervisor exits
        as soon as the owner's connection drops); a container only created (not started
        yet) is left to its owner for a while.
A live daemon's containers are therefore never swept, whoever runs the sweep.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

LABEL_MANAGED = "sandboxd.managed"
LABEL_SESSION = "sandboxd.session"
LABEL_CREATED = "sandboxd.created"
LABEL_OWNER = "sandboxd.owner"
LABEL_OWNER_PROCESS = "sandboxd.owner_process"
LABEL_STATE = "sandboxd.state"
"""On a sandbox its daemon keeps across restarts: the id of that daemon's state directory."""
STARTING_GRACE_S = 300.0
"""How long a created-but-not-started container of an unverifiable owner is left alone."""
KEPT_STOPPED_GRACE_S = 300.0
"""How long another state directory's stopped sandbox is left to its own daemon."""


@dataclass(frozen=True)
class OwnerProcess:
    boot_id: str
    pid_namespace: str
    pid: int
    start_ticks: int

    @classmethod
    def current(cls) -> OwnerProcess:
        pid = os.getpid()
        return cls(_boot_id(), _pid_namespace(), pid, _start_ticks(pid) or 0)

    @classmethod
    def parse(cls, label: str) -> OwnerProcess | None:
        parts = label.split("/")
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))

    @property
    def label(self) -> str:
        return f"{self.boot_id}/{self.pid_namespace}/{self.pid}/{self.start_ticks}"

    def is_alive(self) -> bool:
        """Meaningful only for a process of our boot and pid namespace."""
        return _start_ticks(self.pid) == self.start_ticks


def is_orphan(
    labels: Mapping[str, str], state: str, me: OwnerProcess, now: float | None = None
) -> bool:
    """Whether a managed container may be removed by a daemon that is not its owner.

    `state` is the engine's container state ("running", "created", "exited", ...).
    """
    owner = OwnerProcess.parse(labels.get(LABEL_OWNER_PROCESS, ""))
    if owner is not None and (owner.boot_id, owner.pid_namespace) == (
        me.boot_id,
        me.pid_namespace,
    ):
        return not owner.is_alive()
    if state == "running":
        return False
    if state == "created":
        try:
            created = float(labels.get(LABEL_CREATED, "0"))
        except ValueError:
            created = 0.0
        return (now if now is not None else time.time()) - created > STARTING_GRACE_S
    return True


Disposition = Literal["ours", "kept", "leave", "sweep"]


def disposition(
    labels: Mapping[str, str],
    state: str,
    me: OwnerProcess,
    *,
    instance: str,
    state_id: str | None,
    now: float | None = None,
    stopped_at: float | None = None,
) -> Disposition:
    """What the daemon `instance` (`me`, keeping its sandboxes in the state directory
    `state_id`, or None) does with a managed container in engine state `state`, stopped
    at `stopped_at` (epoch seconds) if known."""
    if labels.get(LABEL_OWNER) == instance:
        return "ours"
    kept_by = labels.get(LABEL_STATE)
    if kept_by is not None and kept_by == state_id:
        return "kept"
    if kept_by is not None:
        if state in ("running", "paused"):
            return "leave"
        now = now if now is not None else time.time()
        if stopped_at is not None and now - stopped_at < KEPT_STOPPED_GRACE_S:
            return "leave"
    return "sweep" if is_orphan(labels, state, me, now) else "leave"


def kept_elsewhere(labels: Mapping[str, str], state: str, state_id: str | None) -> bool:
    """Whether `disposition` needs the container's stop time: a stopped sandbox another
    state directory keeps."""
    kept_by = labels.get(LABEL_STATE)
    return kept_by is not None and kept_by != state_id and state not in ("running", "paused")


def engine_time(text: str) -> float | None:
    """Epoch seconds of an engine timestamp (RFC 3339, nanoseconds), None if unset."""
    if not text or text.startswith("0001-"):
        return None
    day, _, rest = text.rstrip("Z").partition("T")
    clock, _, fraction = rest.partition(".")
    try:
        moment = datetime.fromisoformat(f"{day}T{clock}+00:00")
    except ValueError:
        return None
    return moment.timestamp() + float(f"0.{fraction[:6] or 0}")


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return boot.read().strip()
    except OSError:
        return "unknown-boot"


def _pid_namespace() -> str:
    try:
        link = os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown-ns"
    # "pid:[4026531836]" -> "4026531836": labels stay plain.
    return "".join(ch for ch in link if ch.isdigit()) or "unknown-ns"


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: (pid, start) names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields after the command name start at field 3 (state); starttime is field 22.
    try:
        return int(fields[22 - 3])
    except (IndexError, ValueError):
        return None
