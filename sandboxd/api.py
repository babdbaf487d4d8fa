"""The daemon's wire format: pydantic models for every body that crosses the socket.

Shared by the daemon and its clients (sandboxd.client.connection, sandboxd.client.runner),
so this module must never import docker. Requests forbid unknown fields (a typo must not
silently change what runs); responses ignore them (an older client keeps working against a
newer daemon).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.dataclasses import dataclass as pydantic_dataclass

from logos.options import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SAVED_OUTPUT_BYTES
from logos.result import Result

API_PREFIX = "/v1"
MAX_REQUEST_BODY_BYTES = 1024 * 1024
"""Larger request bodies are answered 413 without being read."""
MAX_OUTPUT_BYTES_LIMIT = 8 * 1024 * 1024
"""Per stream: the most a response may carry, so that one request cannot swell the daemon."""
_MAX_SAVED_OUTPUT_BYTES_LIMIT = 1024 * 1024 * 1024
_DEFAULT_SESSION = "default"
_SESSION_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_SESSION_RE = re.compile(_SESSION_PATTERN)


def is_valid_session_id(session: str) -> bool:
    return _SESSION_RE.fullmatch(session) is not None


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


NulFreeStr = Annotated[str, AfterValidator(_no_nul)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


IfLost = Literal["refuse", "fresh"]
"""What a request does for a session whose sandbox was lost (see StartRequest.if_lost)."""


class AllowedPathSpec(_Request):
    """A host path to mount at the same path inside the sandbox."""

    path: str
    read_only: bool = True


class CeilingRootSpec(_Request):
    """A directory granted to the caller, pinned when it was granted (logos.ceiling)."""

    path: NulFreeStr
    """For messages: the identity is what decides."""
    read_only: bool
    device: int = Field(ge=0)
    inode: int = Field(ge=0)


class StartRequest(_Request):
    """POST /v1/sessions/{id}/start: start the session's sandbox for these settings without
    running a command, so that its first command finds it running. The session's commands
    must send the same settings to use that sandbox."""

    env: dict[str, str] = Field(default_factory=dict)
    allowed_paths: tuple[AllowedPathSpec, ...] = ()
    workdir: str | None = None
    network: bool = False
    allowed_hosts: tuple[NulFreeStr, ...] = ()
    """With network off: the hosts commands may reach through the sandbox's egress proxy
    (HTTP and HTTPS via HTTP_PROXY/HTTPS_PROXY), e.g. "pypi.org", "*.pythonhosted.org",
    "api.example.org:8443"; see the README's "Network by name". Part of the sandbox's
    settings: a session's commands with another list get another sandbox."""
    unix_sockets: bool = False
    """Let commands create Unix sockets (the daemon's config must allow it): they could then
    connect to host sockets under the allowed paths."""
    image: str | None = None
    """None: the daemon's configured image; another image must be in its allowed_images."""
    path_ceiling: tuple[CeilingRootSpec, ...] | None = None
    """The roots a front granted its caller (at most max_allowed_paths): each allowed path,
    once resolved and pinned, must lie within one with at least the access it asks, or the
    request is refused (403 path_outside_ceiling), and the same holds once the sandbox's
    mounts are made. None: the daemon's policy alone decides. Not part of the sandbox's
    settings: every request's mounts are held to its own ceiling."""
    if_lost: IfLost = "refuse"
    """When the session's sandbox was lost (removed or stopped behind the daemon's back, the
    engine or the host restarted, the daemon's policy no longer allowing it after a
    restart): "refuse" answers 410 session_lost with why; "fresh" starts a fresh, empty
    sandbox and says what was lost in the answer's `notice`. Not part of the sandbox's
    settings."""


class RunRequest(StartRequest):
    """POST /v1/run: one command in the session's sandbox."""

    command: NulFreeStr = Field(min_length=1)
    timeout_s: float | None = Field(default=None, gt=0)
    """None: the daemon's default_timeout_s. Larger than max_timeout_s: capped to it."""
    max_output_bytes: int = Field(
        default=DEFAULT_MAX_OUTPUT_BYTES, ge=64, le=MAX_OUTPUT_BYTES_LIMIT
    )
    max_saved_output_bytes: int = Field(
        default=DEFAULT_MAX_SAVED_OUTPUT_BYTES, ge=0, le=_MAX_SAVED_OUTPUT_BYTES_LIMIT
    )
    session: str = Field(default=_DEFAULT_SESSION, pattern=_SESSION_PATTERN)
    background_after_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """A command still running after this many seconds goes on as a job: the answer has its
    output so far and `job` (see GET /v1/jobs/{id}). None: wait for its end."""
    live: bool = False
    """Stream what the command prints while it runs: the answer is then a 200 of NDJSON
    lines (`LiveLine`) once it has printed for a while, ending with the answer as it would
    have come alone (`{"status": S, "answer": ...}`); a quick command's answer comes alone."""


NDJSON = "application/x-ndjson"
"""The content type of a live answer: one JSON document per line."""


class LivePieceModel(_Response):
    """What a running command printed lately on one stream (logos.runners.live.LivePiece)."""

    stream: Literal["stdout", "stderr"]
    text: str
    skipped_bytes: int = Field(default=0, ge=0)
    last: bool = False


class LiveLine(_Response):
    """One line of a live answer: a piece of output, or (last) the answer with its status."""

    output: LivePieceModel | None = None
    status: int | None = None
    answer: dict[str, Any] | None = None


@pydantic_dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="ignore"))
class RunResponse(Result):
    """The command's logos.Result, plus where it ran and which env keys were withheld.

    WHY a subclass of Result: its JSON is Result's fields and these two, so a field added to
    Result reaches the wire without being copied here by hand.
    """

    sandbox: str
    """The container's name."""
    stripped_env_keys: list[str] = field(default_factory=list)
    """Env keys that looked like secrets and were not passed to the command (sorted)."""
    notice: str | None = None
    """Set when a fresh sandbox replaced the session's lost one (`if_lost = "fresh"`): what
    was lost, and why."""

    @classmethod
    def from_result(
        cls,
        result: Result,
        *,
        sandbox: str,
        stripped_env_keys: list[str],
        notice: str | None = None,
    ) -> RunResponse:
        return cls(
            **vars(result), sandbox=sandbox, stripped_env_keys=stripped_env_keys, notice=notice
        )

    @classmethod
    def from_json(cls, content: bytes) -> RunResponse:
        """Parse an answer (unknown fields are ignored); raises pydantic's ValidationError."""
        return _RUN_RESPONSE.validate_json(content)

    def to_result(self) -> Result:
        return Result(**{name: getattr(self, name) for name in _RESULT_FIELDS})


_RUN_RESPONSE = TypeAdapter(RunResponse)
_RESULT_FIELDS = tuple(result_field.name for result_field in dataclasses.fields(Result))


class StartResponse(_Response):
    """POST /v1/sessions/{id}/start: the sandbox is running or starting."""

    session: str
    state: Literal["started", "running", "starting"]
    """"started" by this request, "running" already, or "starting" (an earlier request's
    start is under way: the session's first command waits for it)."""
    sandbox: str
    """The container's name ("" while starting)."""
    steps: dict[str, float] = Field(default_factory=dict)
    """Seconds each step of the start took, in order, when this request started it."""
    notice: str | None = None
    """Set when a fresh sandbox replaced the session's lost one: what was lost, and why."""


class ForkRequest(_Request):
    """POST /v1/sessions/{id}/fork: new sessions, each starting from a copy of what the
    session's commands changed outside its mounts (its /tmp and $HOME)."""

    into: tuple[Annotated[str, Field(pattern=_SESSION_PATTERN)], ...] = Field(min_length=1)
    """The new sessions' ids (unused ones; at most the daemon's max_forks)."""
    sandbox: StartRequest | None = None
    """The forks' sandbox settings, as their commands will send them (paths, network,
    hosts, image: the session's), every fork given them; None: the session's own."""
    share_writable_mounts: bool = False
    """Let the session's and its forks' sandboxes write to one host path at once (they may
    overwrite each other's work); without it, such a fork is refused."""


class ForkResponse(_Response):
    """POST /v1/sessions/{id}/fork: every fork started and filled."""

    session: str
    forks: list[StartResponse]


class ErrorDetail(_Response):
    code: str
    """Machine-readable, e.g. "path_refused", "engine_unavailable"."""
    message: str
    """What was wrong and what to do about it."""


class ErrorResponse(_Response):
    """Every non-2xx answer: `{"error": {"code": ..., "message": ...}}`."""

    error: ErrorDetail


TOO_MANY_SESSIONS = "too_many_sessions"
"""The code of a 429 over the daemon's session caps: a client may wait for room and retry."""
SESSION_LOST = "session_lost"
"""The code of a 410 for a session whose sandbox was lost: the request did not run; it may
be sent again with `if_lost = "fresh"`."""


class WarmPathModel(_Response):
    path: str
    read_only: bool


class WarmPlacesModel(_Response):
    """The warm pool's places held for one spec."""

    uid: int
    paths: list[WarmPathModel] | None
    """Its mounts; None for another caller's spec (theirs to see, not yours)."""
    warm: int
    starting: int
    memory: int
    """Each of its sandboxes' memory limit, bytes (they add up under `pool_memory`)."""
    last_claimed_at: float | None
    """Unix time of the last start that asked for it (None: forgotten, its places going)."""
    kept_warm: bool
    """Whether a claim is refilled; False: its places go to the specs claimed now."""


class HealthResponse(_Response):
    """GET /v1/health: 200 when ok, 503 with each problem and its fix otherwise."""

    ok: bool
    version: str
    engine_version: str | None
    image: str
    image_present: bool
    problems: list[str] = Field(default_factory=list)
    containers: int | None = None
    """Sandbox containers of all callers, starting and closing ones included (None: an older
    daemon)."""
    max_sessions: int | None = None
    """The daemon's cap on them (over it, a new session is answered 429)."""
    max_sessions_per_caller: int | None = None
    warm: int | None = None
    """Warm sandboxes waiting in the pool, counted in `containers` (None: an older daemon)."""
    pool_problem: str | None = None
    """Why the warm pool could not fill lately: new sessions start without it, slower."""
    pool_size: int | None = None
    """`[pool] size` (0: the pool is off; None: an older daemon)."""
    pool_memory: int | None = None
    """`[pool] memory`: the warm sandboxes' memory limits add up to at most this, bytes."""
    pool_places: list[WarmPlacesModel] = Field(default_factory=list)
    """The specs holding warm places, the most lately claimed first."""


class SessionModel(_Response):
    id: str
    containers: list[str]
    created_at: float
    last_used_at: float
    running: int


class SessionsResponse(_Response):
    """GET /v1/sessions: the caller's sessions (other users' sessions are not listed)."""

    sessions: list[SessionModel]


class CloseSessionResponse(_Response):
    """DELETE /v1/sessions/{id}."""

    session: str
    closed: bool


MAX_JOB_WAIT_S = 3600.0
"""The longest `wait_s` a GET /v1/jobs/{id} may ask for."""
JobStatus = Literal["running", "completed", "killed"]
"""temenos's statuses: "killed" when stopped on request, by its timeout, or with its sandbox."""
_JOB_ID_PATTERN = r"^[0-9]{1,12}$"
_JOB_ID_RE = re.compile(_JOB_ID_PATTERN)


def _is_valid_job_id(job_id: str) -> bool:
    return _JOB_ID_RE.fullmatch(job_id) is not None


class JobModel(_Response):
    """One of the caller's jobs: a command that went on past its background threshold."""

    id: str
    session: str
    command: str
    """Its first 4 KiB."""
    status: JobStatus
    started_at: float
    """Unix time."""
    ended_at: float | None = None
    stdout_file: str | None = None
    """Inside its sandbox: the copies of its whole output."""
    stderr_file: str | None = None


class JobsResponse(_Response):
    """GET /v1/sessions/{id}/jobs: the caller's jobs of that session."""

    jobs: list[JobModel]


class JobResponse(JobModel):
    """GET or DELETE /v1/jobs/{id}: the job and its output (so far, or once ended its
    last), with its end's status fields once it ended."""

    result: Result


class GcResponse(_Response):
    """POST /v1/gc: how many stray containers were removed."""

    removed: int


# Compatibility with the temenos daemon (POST /run, GET /health): the same JSON field names
# and types, so that a temenos client can talk to sandboxd unchanged.


class _TemenosRequest(BaseModel):
    """temenos's requests ignore unknown fields, as its Go decoder does."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class TemenosAllowedPath(_TemenosRequest):
    path: str
    read_only: bool = True
    """temenos clients always send it; when absent we choose the safe side (read-only)."""
    metadata_only: bool = False
    """temenos's stat-only mounts, which its Linux sandbox (bwrap) does not mount at all:
    sandboxd does the same (the path must still be absolute)."""


class TemenosRunRequest(_TemenosRequest):
    """POST /run in temenos's shape."""

    command: NulFreeStr
    """Empty runs nothing and exits 0, as `bash -c ''` does in temenos."""
    env: dict[str, str] | None = None
    allowed_paths: tuple[TemenosAllowedPath, ...] | None = None
    network: bool | None = None
    """Absent means off: sandboxd's safe default (temenos's MVP had the network on)."""
    timeout: int = 0
    """Whole seconds, as temenos's Go int; 0 or less means temenos's default
    (TEMENOS_DEFAULT_TIMEOUT_S), within the daemon's max_timeout_s."""
    caller_id: str = ""
    """temenos's opaque caller id; sandboxd uses it to pick the session (warm container)."""
    auth_token: str = ""
    """temenos's Kubernetes token. Accepted and unused: the socket's permissions and the peer's
    credentials are sandboxd's authentication."""

    def session_id(self) -> str:
        """caller_id as the session when it is a valid session id, else a stable digest of it."""
        if not self.caller_id:
            return _DEFAULT_SESSION
        if is_valid_session_id(self.caller_id):
            return self.caller_id
        digest = hashlib.sha256(self.caller_id.encode("utf-8", "surrogatepass")).hexdigest()
        return f"temenos-{digest[:24]}"


TEMENOS_DEFAULT_TIMEOUT_S = 20 * 60
"""temenos's timeout of a run that asks for none (or for 0 or less)."""
_TEMENOS_JOB_ID_PATTERN = r"^[0-9a-f]{6,12}$"
"""temenos's job ids: its counter in at least six hex digits (`%06x`)."""
_TEMENOS_JOB_ID_RE = re.compile(_TEMENOS_JOB_ID_PATTERN)


def temenos_job_id(number: int) -> str:
    """A job's id on temenos's routes (the native API's id is the same number in decimal)."""
    return f"{number:06x}"


def job_number_of_temenos_id(job_id: str) -> int | None:
    """The job number a temenos job id names; None unless it is one as temenos writes it."""
    if _TEMENOS_JOB_ID_RE.fullmatch(job_id) is None:
        return None
    number = int(job_id, 16)
    return number if temenos_job_id(number) == job_id else None


class TemenosRunResponse(_Response):
    """temenos's answer: exit_code is -1 when the command did not exit by itself."""

    stdout: str
    stderr: str
    exit_code: int
    stripped_env_keys: list[str] | None = None
    """Omitted when nothing was stripped, as temenos does."""
    job_id: str | None = None
    """Set, with `status` "background", when the command went on as a job."""
    status: Literal["background"] | None = None


class TemenosJob(_Response):
    """temenos's JobInfo: empty fields are omitted (None here), as its omitempty does."""

    id: str
    caller_id: str | None = None
    command: str
    status: JobStatus
    exit_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    started_at: str
    """RFC 3339, UTC."""
    completed_at: str | None = None


class TemenosError(_Response):
    """temenos's error body: `{"error": "..."}`."""

    error: str


class TemenosHealthResponse(_Response):
    ok: bool
    platform: str
    version: str
