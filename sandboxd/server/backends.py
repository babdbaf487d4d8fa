"""The backend the daemon's config names, built: the one place a Backend is constructed.

A new backend is a package beside sandboxd.docker that implements sandboxd.backend.Backend,
a value of DaemonConfig.backend, and a case here.
"""

from __future__ import annotations

import dataclasses
from typing import assert_never

from sandboxd.backend import Backend
from sandboxd.docker.backend import DockerBackend, EgressSink
from sandboxd.docker.keeping import Keeping, SpecCheck
from sandboxd.docker.records import RecordStore
from sandboxd.egress.proxy import EgressSettings
from sandboxd.server.config import DaemonConfig
from sandboxd.server.state_dir import StateDir
from sandboxd.sessions.caps import SessionCaps
from sandboxd.sessions.lost import LOST_FILE, LostSessions


def build_backend(
    config: DaemonConfig,
    *,
    on_egress: EgressSink | None = None,
    keep_in: StateDir | None = None,
    spec_check: SpecCheck | None = None,
) -> Backend:
    """The configured backend, not started yet (use it with `async with`). `keep_in`: the
    state directory (claimed) its sandboxes are kept in across restarts, each taken over
    only while `spec_check` finds nothing against it (None: they end with the backend, as
    for `sandboxd doctor`).

    Raises ValueError when the config's values cannot work for it (e.g. no worker)."""
    match config.backend:
        case "docker":
            keeping = None
            if keep_in is not None:
                assert spec_check is not None, "kept sandboxes are held to the policy"
                keeping = Keeping(
                    state_id=keep_in.id,
                    records=RecordStore(keep_in.path),
                    lost=LostSessions(keep_in.path / LOST_FILE),
                    orphan_ttl_s=config.orphan_ttl_s,
                    vet=spec_check,
                )
            return DockerBackend(
                image=config.image,
                idle_ttl_s=config.idle_ttl_s,
                max_workers=config.max_workers,
                state_dir=config.state_dir,
                session_caps=_session_caps(config),
                pool=config.pool,
                egress=EgressSettings(
                    hosts=config.egress_hosts,
                    max_connections=config.egress_max_connections,
                    max_bytes=config.egress_max_bytes,
                ),
                on_egress=on_egress,
                keeping=keeping,
            )
        case unknown:
            assert_never(unknown)


def _session_caps(config: DaemonConfig) -> SessionCaps:
    """The config's caps (unset ones from the host), and how long a start waits for room."""
    caps = SessionCaps.derive(
        pids=config.limits.pids,
        memory_bytes=config.limits.memory,
        total=config.max_sessions,
        per_caller=config.max_sessions_per_caller,
    )
    return dataclasses.replace(caps, wait_s=config.session_wait_s)
