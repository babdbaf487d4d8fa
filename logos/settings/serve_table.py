"""The `[serve]` table of the config file: how `logos serve` listens and what it allows
(`logos.serve` is started with it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_PORT = 8765


class ServeSettings(BaseModel):
    """Every key is optional; the defaults are the safe choice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    """Where to listen; an address other than loopback also needs `--allow-remote`."""
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    """The TCP port (0: any free one, printed at start)."""
    socket: str | None = None
    """Serve on this Unix socket (created 0600) instead of TCP."""
    max_concurrent_runs: int = Field(default=4, ge=1, le=1000)
    """Runs going at once; one more is answered 429."""
    approval_ttl_s: float = Field(default=600.0, gt=0)
    """How long a command waits for approval before it is denied as "expired"."""
    allow_local_auto: bool = False
    """Let a request run commands with local bash without approval (approval "auto")."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """The largest request body; a larger one is answered 413."""
    max_connections: int = Field(default=256, ge=4)
    """Open connections (event streams included); more are answered 503."""
    subscriber_buffer: int = Field(default=1024, ge=16)
    """Events one stream may fall behind before it is dropped (it reconnects with replay)."""
    replay_memory: int = Field(default=4096, ge=16)
    """Events of a live run kept in memory for replay; older ones are read from its file."""
    keepalive_s: float = Field(default=15.0, gt=0)
    """A comment on an idle event stream this often, so proxies and clients keep it."""
