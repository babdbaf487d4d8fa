"""sandboxd as a logos sandbox kind, registered under the entry points `logos.sandboxes`.

logos finds it by its name, "sandboxd", and knows it only through the protocols
logos.runners.sandboxes.SandboxKind, BatchSandboxKind (a batch can run in it) and
ForkingSandboxKind (a batch can start every task from one prepared session), which this object
implements structurally: sandboxd imports nothing of logos but its vocabulary (logos.result,
logos.options, logos.runners.capture, logos.closing).
"""

from __future__ import annotations

from typing import Protocol

from logos.options import AllowedPath, ExecOptions, described_paths
from logos.result import Result
from sandboxd.client.autostart import AutostartError, ensure_serving
from sandboxd.client.connection import check_health, health_problem
from sandboxd.client.runner import SandboxForkError, SandboxRunner, lost_session, refused_when_full
from sandboxd.paths import SocketPathError, resolve_socket_path


class Settings(Protocol):
    """What this kind reads of logos.runners.sandboxes.SandboxSettings."""

    @property
    def socket(self) -> str | None: ...

    @property
    def image(self) -> str | None: ...

    @property
    def network(self) -> bool: ...

    @property
    def allowed_hosts(self) -> tuple[str, ...]: ...

    @property
    def unix_sockets(self) -> bool: ...

    @property
    def allowed_paths(self) -> tuple[AllowedPath, ...]: ...

    @property
    def session(self) -> str | None: ...


class SandboxdKind:
    """Commands run in sandboxd's Docker containers, through the daemon's socket."""

    name = "sandboxd"
    description = "Docker containers run by the sandboxd daemon (`sandboxd serve`)"
    platform = "Linux in a Docker sandbox, shell bash"

    def open(self, settings: Settings) -> SandboxRunner:
        return SandboxRunner(
            socket=settings.socket,
            session=settings.session,
            image=settings.image,
            network=settings.network,
            unix_sockets=settings.unix_sockets,
        )

    def problem(self, settings: Settings) -> str | None:
        """The daemon's health, asked for real (GET /v1/health)."""
        try:
            socket = resolve_socket_path(settings.socket)
        except SocketPathError as exc:
            return str(exc)
        return health_problem(socket)

    def where(self, settings: Settings) -> str:
        try:
            return str(resolve_socket_path(settings.socket))
        except SocketPathError:
            return str(settings.socket)

    def prompt_note(self, settings: Settings) -> str:
        paths = described_paths(settings.allowed_paths)
        if settings.network:
            network = "on"
        elif settings.allowed_hosts:
            network = (
                "off, except HTTP and HTTPS to these hosts through a proxy already set in "
                f"HTTP_PROXY and HTTPS_PROXY: {', '.join(settings.allowed_hosts)}; other hosts "
                "answer 403 blocked by sandbox policy"
            )
        else:
            network = "off: do not try to download anything"
        return (
            f"Commands run in a sandbox that sees only these host paths: {paths}. "
            f"Network access is {network}."
        )

    def session_cap(self, settings: Settings) -> int | None:
        """The daemon's max_sessions_per_caller, from its health answer."""
        try:
            socket = resolve_socket_path(settings.socket)
        except SocketPathError:
            return None
        answer = check_health(socket).answer
        return None if answer is None else answer.max_sessions_per_caller

    def refused_when_full(self, result: Result) -> bool:
        return refused_when_full(result)

    async def fork(self, prepared: object, options: ExecOptions) -> SandboxRunner | Result:
        """One fork of `prepared`'s session whose sandbox mounts `options`' paths."""
        if not isinstance(prepared, SandboxRunner):
            raise TypeError(f"sandboxd forks only its own runners, not {type(prepared).__name__}")
        try:
            (forked,) = await prepared.fork(1, options=options)
        except SandboxForkError as exc:
            return Result(command="", error=str(exc))
        return forked

    def lost_session(self, result: Result) -> bool:
        return lost_session(result)

    def ensure_running(self, settings: Settings) -> None:
        try:
            ensure_serving(resolve_socket_path(settings.socket))
        except (SocketPathError, AutostartError) as exc:
            raise ValueError(str(exc)) from None


SANDBOXD = SandboxdKind()
"""The object the entry point `sandboxd` names."""
