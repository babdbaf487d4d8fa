"""The backend the daemon's config names, built: the one place a Backend is constructed.

A new backend is a package beside sandboxd.docker that implements sandboxd.backend.Backend,
a value of DaemonConfig.backend, and a case here.
"""

from __future__ import annotations

from typing import assert_never

from sandboxd.backend import Backend
from sandboxd.config import DaemonConfig
from sandboxd.docker.backend import DockerBackend, EgressSink
from sandboxd.egress import EgressSettings
from sandboxd.session_caps import SessionCaps


def build_backend(config: DaemonConfig, *, on_egress: EgressSink | None = None) -> Backend:
    """The configured backend, not started yet (use it with `async with`).

    Raises ValueError when the config's values cannot work for it (e.g. no worker)."""
    match config.backend:
        case "docker":
            return DockerBackend(
                image=config.image,
                idle_ttl_s=config.idle_ttl_s,
                max_workers=config.max_workers,
                state_dir=config.state_dir,
                session_caps=SessionCaps.from_config(config),
                pool=config.pool,
                egress=EgressSettings(
                    hosts=config.egress_hosts,
                    max_connections=config.egress_max_connections,
                    max_bytes=config.egress_max_bytes,
                ),
                on_egress=on_egress,
            )
        case unknown:
            assert_never(unknown)
