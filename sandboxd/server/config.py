"""The daemon's configuration: a TOML file validated into a frozen pydantic model.

Every key is optional; the defaults are the safe ones (no network, only the default image,
secret-looking env keys withheld). An unknown key is an error naming the key and the file,
because a misspelt deny must never be silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    model_validator,
)

from logos.errors import describe_invalid
from sandboxd.backend import Limits
from sandboxd.egress.host_rules import is_valid_name, normalise_host, parse_address
from sandboxd.paths import default_state_dir
from sandboxd.server.audit import AUDIT_LINE_MAX_BYTES
from sandboxd.sessions.pool import PoolSettings
from sandboxd.sizes import Size

DEFAULT_IMAGE = "logos-sandbox:latest"
_CONFIG_ENV = "SANDBOXD_CONFIG"
_MIN_OUTPUT_MEMORY = 64 * 1024**2
"""Room for dozens of requests at the default max_output_bytes."""


class ConfigError(ValueError):
    """The configuration file cannot be used; the message names the file and the key."""


def _host_path(value: object) -> Path:
    """An absolute host path; `~` is the daemon user's home. Symlinks are resolved so that the
    policy compares it with requested paths, which are resolved too."""
    if not isinstance(value, str | Path):
        raise ValueError("expected a path string")
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ValueError(
            f"{str(value)!r} is not absolute: write a full path or one starting with ~"
        )
    return path.resolve()


HostPath = Annotated[Path, BeforeValidator(_host_path)]


def _name_table(table: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Names normalised as the proxy compares them; each with at least one valid address."""
    checked: dict[str, tuple[str, ...]] = {}
    for name, addresses in table.items():
        host = normalise_host(name)
        if not is_valid_name(host):
            raise ValueError(f"{name!r} is not a host name (letters, digits, hyphens, dots)")
        if not addresses:
            raise ValueError(f'{name!r} has no address: list one or more, e.g. ["10.0.0.5"]')
        for address in addresses:
            if parse_address(address) is None:
                raise ValueError(f"{name!r}: {address!r} is not an IP address")
        checked[host] = tuple(addresses)
    return checked


def _positive_finite(value: float) -> float:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return value


Seconds = Annotated[float, Field(gt=0), AfterValidator(_positive_finite)]


class DaemonConfig(BaseModel):
    """Everything `sandboxd serve` can be told in its TOML file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["docker"] = "docker"
    """What runs the sandboxes (sandboxd.server.backends builds it); "docker" is the only one so
    far."""
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """The image commands run in when a request names none."""
    allowed_images: tuple[str, ...] = ()
    """Other images a request may ask for by name (the default image is always allowed)."""
    allowed_roots: tuple[HostPath, ...] = ()
    """When set, only paths inside these directories may be mounted (empty: anywhere not denied)."""
    allowed_system_paths: tuple[HostPath, ...] = ()
    """System directories (or places inside them) that may be mounted all the same, e.g.
    ["/usr/share/dict"]: each lifts the system directory rules for itself and what it holds,
    never those for the root, the engine, the daemon's own files or credentials."""
    extra_denies: tuple[HostPath, ...] = ()
    """Paths never mounted, nor anything inside them, nor any directory containing them."""
    allow_network: StrictBool = False
    """Whether a request may ask for network access (network=true)."""
    allow_private_hosts: StrictBool = False
    """Whether a request's allowed_hosts may name loopback, private, link-local or other
    non-public addresses and networks (an intranet, a test server): with it, a sandbox can
    reach services of this host and its network that network=true never reaches."""
    max_allowed_hosts: int = Field(default=64, ge=1, le=4096)
    """Most allowed_hosts entries one request may list."""
    egress_hosts: Annotated[dict[str, tuple[str, ...]], AfterValidator(_name_table)] = Field(
        default_factory=dict
    )
    """Names the egress proxy resolves from this table instead of DNS (name = ["addresses"]):
    for intranets and tests."""
    egress_max_connections: int = Field(default=64, ge=1, le=4096)
    """Connections one sandbox may have open through its egress proxy at once."""
    egress_max_bytes: Annotated[Size, Field(ge=1024**2)] = 4 * 1024**3
    """Bytes one sandbox may move through its egress proxy in all, both ways (bytes or "4g")."""
    allow_unix_sockets: StrictBool = False
    """Whether a request may ask for Unix sockets (unix_sockets=true): its commands could then
    connect to host sockets found under its mounts (an ssh agent, a tmux server, an engine)."""
    allow_env_keys: tuple[str, ...] = ()
    """Env names or fnmatch patterns passed through even though they look like secrets."""
    limits: Limits = Limits()
    """Resources of each container."""
    pool: PoolSettings = PoolSettings()
    """Sandboxes kept warm for the specs asked for lately, so a new session waits for no
    container start (see sandboxd.sessions.pool)."""
    default_timeout_s: Seconds = 120.0
    """Timeout of a command whose request sets none."""
    max_timeout_s: Seconds = 3600.0
    """Upper bound of any command's timeout; larger requested timeouts are capped to it."""
    shutdown_grace_s: float = Field(default=5.0, ge=0, le=600)
    """On SIGTERM/SIGINT, how long running commands may finish before they are killed."""
    idle_ttl_s: Seconds = 600.0
    """A session's containers are removed after this long without a command."""
    orphan_ttl_s: Seconds = 600.0
    """How long a sandbox outlives its daemon: once the daemon is gone (stopped without
    `--remove-sandboxes`, or killed), its sandboxes and their jobs go on, and wait this long
    for the next daemon on the same state directory to take them over; then they end
    themselves (their commands and jobs killed)."""
    max_workers: int = Field(default=32, ge=1, le=1024)
    """Threads for blocking Docker API calls (container start, removal, ...); as many again
    for `docker exec` fallback commands, which hold theirs while they run."""
    state_dir: HostPath = Field(default_factory=default_state_dir)
    """Daemon state: per-container control directories (and the audit log by default)."""
    audit_log: HostPath | None = None
    """Append-only JSON-lines audit log, one line per request (default: state_dir/audit.log)."""
    max_sessions: int | None = Field(default=None, ge=1)
    """Sandbox containers running or starting at once (unset: from the host's pids and memory)."""
    max_sessions_per_caller: int | None = Field(default=None, ge=1)
    """Containers one caller (uid) may have running or starting (unset: 3/4 of max_sessions)."""
    max_connections: int = Field(default=512, ge=1, le=1_000_000)
    """Client connections served at once; lowered at start to stay below the open-files limit."""
    idle_timeout_s: Seconds = 30.0
    """A keep-alive connection that sends no request for this long is closed."""
    max_allowed_paths: int = Field(default=64, ge=1, le=4096)
    """Most allowed_paths one request may list (each one is resolved and checked), and most
    roots its path_ceiling may hold."""
    max_output_memory: Annotated[Size, Field(ge=_MIN_OUTPUT_MEMORY)] = 1024**3
    """Reply memory all requests in flight may reserve together (bytes or "1g"), see README."""
    max_output_memory_wait_s: float = Field(default=30.0, ge=0, le=3600)
    """How long a request waits for output memory to free up before it is answered 503."""
    audit_log_max_bytes: Annotated[Size, Field(ge=2 * AUDIT_LINE_MAX_BYTES)] = 64 * 1024**2
    """The audit log is rotated before a line would take it past this size (bytes or "64m")."""
    audit_log_backups: int = Field(default=3, ge=0, le=1000)
    """Rotated audit logs kept (audit.log.1 is the newest); 0 starts the log afresh."""
    max_jobs_per_caller: int = Field(default=100, ge=1, le=100_000)
    """Jobs one caller (uid) may have at once, running or ended and not yet expired (temenos
    keeps 100); a command that would be one more is stopped and answered 429."""
    finished_job_ttl_s: Seconds = 300.0
    """An ended job is kept this long after it ended, or after its output was first read if
    that came later (temenos keeps them 5 minutes); then it is forgotten."""
    session_wait_s: Seconds = 60.0
    """A new sandbox over the caps first makes room by removing the least recently used idle
    sandbox of a temenos caller; when all of those are busy, it waits this long for one to go
    idle, then gets the 429."""
    max_forks: int = Field(default=16, ge=1, le=256)
    """Forks one request may ask for (POST /v1/sessions/{id}/fork); each is a sandbox under
    the session caps and a copy of the session's /tmp and $HOME."""
    temenos_background_after_s: Seconds = 30.0
    """On temenos's POST /run, a command still running after this long goes on as a job and
    is answered with its id (temenos's threshold)."""

    @model_validator(mode="after")
    def _timeouts_agree(self) -> DaemonConfig:
        if self.default_timeout_s > self.max_timeout_s:
            raise ValueError(
                f"default_timeout_s ({self.default_timeout_s}) is larger than max_timeout_s "
                f"({self.max_timeout_s}): lower the default or raise the maximum"
            )
        return self

    @model_validator(mode="after")
    def _session_caps_agree(self) -> DaemonConfig:
        total, per_caller = self.max_sessions, self.max_sessions_per_caller
        if total is not None and per_caller is not None and per_caller > total:
            raise ValueError(
                f"max_sessions_per_caller ({per_caller}) is larger than max_sessions ({total}): "
                "lower it, or raise max_sessions"
            )
        return self

    @property
    def audit_log_path(self) -> Path:
        return self.audit_log if self.audit_log is not None else self.state_dir / "audit.log"


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$SANDBOXD_CONFIG`, else `$XDG_CONFIG_HOME/sandboxd/config.toml`, else under ~/.config."""
    env = os.environ if environ is None else environ
    if env.get(_CONFIG_ENV):
        return Path(env[_CONFIG_ENV]).expanduser()
    config_home = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "sandboxd" / "config.toml"


def config_file_in_use(path: Path | None = None) -> Path | None:
    """The file `load_config(path)` reads, absolute; None when it reads none."""
    if path is None:
        candidate = default_config_path()
        if not candidate.is_file():
            return None
        path = candidate
    return path.absolute()


def load_config(path: Path | None = None) -> DaemonConfig:
    """Read the config file: `path` must exist; without it the default file is read if present."""
    path = config_file_in_use(path)
    if path is None:
        return DaemonConfig()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror or exc}; "
            "check the path given with --config"
        ) from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    return config_from_mapping(data, source=str(path))


def config_from_mapping(data: Mapping[str, Any], *, source: str) -> DaemonConfig:
    """Validate parsed TOML; errors name every bad key of `source`."""
    try:
        return DaemonConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(
            f"config file {source}: {describe_invalid(exc, 'key', _known_keys)}"
        ) from None


def _known_keys(location: tuple[int | str, ...]) -> list[str]:
    """The keys of the table an unknown key was found in."""
    tables: dict[object, type[BaseModel]] = {"limits": Limits, "pool": PoolSettings}
    table = tables.get(location[0]) if len(location) > 1 else None
    return sorted((table or DaemonConfig).model_fields)
