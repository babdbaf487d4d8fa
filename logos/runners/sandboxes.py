"""The sandbox kinds a front end can choose by name: what opens a runner in a sandbox.

A kind lives in the package that provides the sandbox (sandboxd's is `sandboxd.kind`) and
registers under the entry-point group `logos.runners.sandboxes` in that package's pyproject.toml:

    [project.entry-points."logos.sandboxes"]
    sandboxd = "sandboxd.kind:SANDBOXD"

so logos finds it by name and never imports the package itself. A front end (the `logos`
command, a server) states what it wants as `SandboxSettings` and asks the kind for a runner,
for what stands in the way, and for what the system prompt should say about it.

A batch of tasks asks more of a kind (`BatchSandboxKind`): how many sessions it may hold at
once, whether a command was refused only because the sandbox is full (to wait and retry
it), and for the service to be started on a cluster node that has none running. A kind
that cannot say these is still a sandbox kind; `logos batch` refuses it by name. A batch
that starts every task from one prepared session needs a kind that forks sessions
(`ForkingSandboxKind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Protocol, runtime_checkable

from logos.options import AllowedPath, ExecOptions
from logos.result import Result
from logos.runners.base import Runner

ENTRY_POINT_GROUP = "logos.sandboxes"


@dataclass(frozen=True)
class SandboxSettings:
    """What a front end asks of a sandbox; each kind reads what applies to it."""

    socket: str | None = None
    """The daemon's address or socket (None: the kind's default)."""
    image: str | None = None
    """The image commands run in (None: the sandbox's default)."""
    network: bool = False
    """Ask for network access (the sandbox's own configuration must allow it)."""
    unix_sockets: bool = False
    """Let commands create Unix sockets (the sandbox's own configuration must allow it)."""
    allowed_hosts: tuple[str, ...] = ()
    """The hosts commands may reach with network off, for the system prompt (each command's
    ExecOptions says which it is given)."""
    allowed_paths: tuple[AllowedPath, ...] = ()
    """The host paths commands may use, for the system prompt (each command's ExecOptions
    says which it is given)."""
    session: str | None = None
    """The sandbox session that keeps state between runners (None: a fresh one per runner)."""
    auth_token_file: str | None = None
    """A file holding the token the daemon asks for (temenos in Kubernetes: the service
    account's), read again when it changes; None: no token."""


@runtime_checkable
class SandboxKind(Protocol):
    """One kind of sandbox: how to open a runner in it, and whether it can run commands now."""

    @property
    def name(self) -> str:
        """What front ends call it (its entry point's name)."""
        ...

    @property
    def description(self) -> str:
        """One line saying what it is, for lists of kinds."""
        ...

    @property
    def platform(self) -> str:
        """What the system prompt says commands run on (e.g. "Linux in a Docker sandbox")."""
        ...

    def open(self, settings: SandboxSettings) -> Runner:
        """A runner whose commands run in this sandbox; close it when done. ValueError when
        the settings cannot work (its message says why)."""
        ...

    def problem(self, settings: SandboxSettings) -> str | None:
        """Why it cannot run commands now, with the fix (for `logos doctor` and a check
        before the model is called); None when it can."""
        ...

    def where(self, settings: SandboxSettings) -> str:
        """Where its runners run commands, for messages (e.g. the daemon's socket)."""
        ...

    def prompt_note(self, settings: SandboxSettings) -> str:
        """What the system prompt tells the model about the sandbox (what it sees, the
        network)."""
        ...


@runtime_checkable
class BatchSandboxKind(SandboxKind, Protocol):
    """A sandbox kind a batch can run many tasks in: it knows its session cap, what a full
    sandbox answers, and how to start its service on a node."""

    def session_cap(self, settings: SandboxSettings) -> int | None:
        """How many sessions one caller may hold at once (None: unknown, or no cap), so that
        a batch runs no more tasks at once than the sandbox would take."""
        ...

    def refused_when_full(self, result: Result) -> bool:
        """Whether `result` is the sandbox refusing a new session only because it holds as
        many as it may: the command never ran, and the same one can be retried later."""
        ...

    def ensure_running(self, settings: SandboxSettings) -> None:
        """Start the sandbox's service on this machine if none answers, and return once it
        can run commands (a cluster node needs none started by hand). ValueError says why
        it cannot."""
        ...


@runtime_checkable
class ForkingSandboxKind(BatchSandboxKind, Protocol):
    """A batch kind whose sessions can be forked: every task of a batch can start from a
    copy of one session prepared once (`logos batch --prepare`)."""

    async def fork(self, prepared: Runner, options: ExecOptions) -> Runner | Result:
        """A runner of a new session starting from a copy of what `prepared`'s commands
        changed outside their paths (`prepared` was opened by this kind and runs no command
        now); its commands run with `options`, their paths mounted in place of `prepared`'s.
        When it could not fork, a Result whose error says why: `refused_when_full` tells a
        sandbox that is only full, `lost_session` a prepared session that is gone."""
        ...

    def lost_session(self, result: Result) -> bool:
        """Whether a fork's `result` says the prepared session no longer exists (a sandbox
        removes idle sessions): prepare it again."""
        ...


def installed_kinds() -> set[str]:
    """The names of the installed kinds (without loading them)."""
    return {entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)}


def sandbox_kind(name: str) -> SandboxKind:
    """The installed kind called `name`; a ValueError lists the installed ones."""
    entries = {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}
    if name not in entries:
        installed = "; ".join(_describe(entries[other]) for other in sorted(entries))
        raise ValueError(
            f"unknown sandbox kind {name!r}: "
            + (f"the installed ones are {installed}" if installed else "none is installed")
            + "; install the package that provides it (packages register their kinds under "
            f"the entry-point group {ENTRY_POINT_GROUP!r})"
        )
    kind = entries[name].load()
    if not isinstance(kind, SandboxKind):
        raise ValueError(
            f"the sandbox kind {name!r} ({entries[name].value}) is not a "
            "logos.runners.sandboxes.SandboxKind: reinstall the package that provides it, in a "
            "version that matches this logos"
        )
    return kind


def batch_sandbox_kind(name: str) -> BatchSandboxKind:
    """The installed kind called `name`, if a batch can run in it; a ValueError says why
    not and what to use instead."""
    kind = sandbox_kind(name)
    if not isinstance(kind, BatchSandboxKind):
        raise ValueError(
            f"a batch cannot run in the sandbox kind {name!r}: it does not say how many "
            "sessions one caller may hold, what it answers when full, or how to start it on "
            "a cluster node (logos.runners.sandboxes.BatchSandboxKind): use a kind that does, "
            "such as sandboxd"
        )
    return kind


def _describe(entry: EntryPoint) -> str:
    """`name: description`, or the name alone when the kind cannot be loaded."""
    try:
        kind = entry.load()
        return f"{entry.name}: {kind.description}"
    except Exception:  # a broken kind must not hide the others from the message
        return entry.name
