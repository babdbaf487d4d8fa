"""`sandboxd serve`: bind the socket safely, serve until a signal, clean up everything.

The socket is created 0600 with no moment where it is wider (bound under a umask of 0o177)
in a parent directory created 0700. A lock file next to it (`<socket>.lock`, flock held for
the daemon's life) makes "is a daemon serving this socket?" a race-free question: a stale
socket (its daemon died) is replaced, a live daemon is an error that says so.

On SIGTERM or SIGINT the daemon stops accepting, lets running commands finish for
`shutdown_grace_s` (a second signal cuts the grace short), has the rest killed, and leaves
its sandboxes running, their jobs too, for the next daemon on its state directory to take
over (sandboxd.docker.keeping; they end themselves after `orphan_ttl_s` when none comes).
On SIGUSR1 (`sandboxd stop --remove-sandboxes`) it removes every sandbox instead. Either way
it removes its socket. Killed, it leaves its sandboxes as a stop does.

At start it raises its open-files limit, caps connections below it, and fixes how freed
memory goes back to the system (sandboxd.server.process).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from sandboxd.paths import (
    SOCKET_ENV,
    check_socket_path_length,
    lock_path,
    open_lock_file,
    take_pid_lock,
)
from sandboxd.policy.places import ENGINE_SOCKETS
from sandboxd.policy.policy import Policy
from sandboxd.server.app import App, sandboxd_version
from sandboxd.server.audit import AuditLog
from sandboxd.server.backends import build_backend
from sandboxd.server.config import DaemonConfig
from sandboxd.server.http import HttpServer
from sandboxd.server.process import (
    connection_cap,
    raise_open_files_limit,
    return_freed_memory_promptly,
)
from sandboxd.server.spec_check import spec_check
from sandboxd.server.state_dir import StateDir, StateDirError, claim_state_dir
from sandboxd.sessions.job_store import JobStore

logger = logging.getLogger(__name__)

_LISTEN_BACKLOG = 512
REMOVE_SIGNAL = signal.SIGUSR1
"""Stop, and remove every sandbox (`sandboxd stop --remove-sandboxes`)."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, REMOVE_SIGNAL)


class DaemonError(Exception):
    """The daemon cannot start; the message says why and what to do."""


@dataclass
class BoundSocket:
    """A listening socket at `path`, plus the lock that makes it ours."""

    sock: socket.socket
    path: Path
    inode: int
    lock_fd: int

    def release(self) -> None:
        """Close the socket, remove its file if it is still ours, drop the lock."""
        self.sock.close()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        os.close(self.lock_fd)


def _bind_socket(path: Path) -> BoundSocket:
    """Bind and listen on `path` (0600), replacing a stale socket; DaemonError otherwise."""
    check_socket_path_length(path)
    if not path.parent.exists():
        try:
            path.parent.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise DaemonError(
                f"cannot create the socket's directory {path.parent}: {exc.strerror or exc}; "
                f"choose a socket path in a directory you can write (--socket or ${SOCKET_ENV})"
            ) from None
    lock_fd = _lock(path)
    try:
        _clear_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # WHY the umask: bind() creates the file with 0777 & ~umask; a chmod afterwards
            # would leave a moment where anyone could connect. The umask is process-wide,
            # which is safe here: no other thread exists yet.
            previous = os.umask(0o177)
            try:
                sock.bind(os.fspath(path))
            finally:
                os.umask(previous)
            sock.listen(_LISTEN_BACKLOG)
            inode = os.lstat(path).st_ino
        except OSError as exc:
            sock.close()
            raise DaemonError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    except BaseException:
        os.close(lock_fd)
        raise
    return BoundSocket(sock=sock, path=path, inode=inode, lock_fd=lock_fd)


def _lock(path: Path) -> int:
    lock = lock_path(path)
    fd = open_lock_file(lock, DaemonError)
    try:
        take_pid_lock(
            fd,
            lock,
            DaemonError,
            held=lambda pid: (
                f"another sandboxd is already serving {path}{pid}: stop it first, "
                "or start this one with another --socket"
            ),
        )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _clear_stale(path: Path) -> None:
    """Remove a socket nobody answers on; refuse to touch anything else."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise DaemonError(
            f"{path} exists and is not a socket: remove it or choose another path with --socket"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(os.fspath(path))
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(path)
        logger.info("replaced the stale socket %s", path)
        return
    except OSError as exc:
        raise DaemonError(
            f"cannot tell whether a daemon serves {path} ({exc.strerror or exc}): remove the "
            "socket if no daemon runs, or choose another path with --socket"
        ) from exc
    finally:
        probe.close()
    raise DaemonError(
        f"a daemon is already answering on {path}: stop it first, or choose another --socket"
    )


async def serve(config: DaemonConfig, socket_path: Path, config_path: Path | None = None) -> None:
    """Serve on `socket_path` until SIGTERM/SIGINT, then shut down cleanly; `config_path` is
    the file `config` came from (never mountable)."""
    # WHY first: a signal that arrives between binding and serving must not kill the
    # process with its default action, leaving the socket and containers behind.
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        open_files = raise_open_files_limit()
        return_freed_memory_promptly()
        bound = _bind_socket(socket_path)
        try:
            state = _claim_state(config)
            try:
                audit = _open_audit(config)
                try:
                    await _serve_bound(
                        config, config_path, bound, state, audit, signals, open_files
                    )
                finally:
                    audit.close()
            finally:
                state.release()
        finally:
            bound.release()
    logger.info("stopped; socket %s removed", socket_path)


def daemon_policy(
    config: DaemonConfig, *, socket_path: Path, config_path: Path | None = None
) -> Policy:
    """The policy of a daemon serving `socket_path` with `config` (read from `config_path`),
    as the current user: the config's rules, and the daemon's own files refused."""
    own: list[tuple[Path, str]] = [
        (socket_path, f"the daemon's own socket {socket_path}"),
        (lock_path(socket_path), f"the daemon's lock file {lock_path(socket_path)}"),
        (config.state_dir, f"the daemon's state directory {config.state_dir}"),
        (config.audit_log_path, f"the daemon's audit log {config.audit_log_path}"),
        *_installation(),
    ]
    if config_path is not None:
        own.append((config_path, f"the daemon's config file {config_path}"))
    return Policy(
        image=config.image,
        allowed_images=config.allowed_images,
        allowed_roots=config.allowed_roots,
        allowed_system_paths=config.allowed_system_paths,
        extra_denies=config.extra_denies,
        allow_network=config.allow_network,
        allow_env_keys=config.allow_env_keys,
        allow_unix_sockets=config.allow_unix_sockets,
        allow_private_hosts=config.allow_private_hosts,
        daemon_home=Path.home(),
        daemon_paths=own,
        engine_sockets=(*ENGINE_SOCKETS, *_engine_sockets_from_env(os.environ)),
    )


def _installation() -> list[tuple[Path, str]]:
    """The daemon's own code (its packages, and its virtualenv when it runs in one).

    WHY: a sandbox that could write them would change what the daemon runs next; one that
    could read the lock file could flock it and keep the daemon from restarting."""
    found = []
    for package in ("sandboxd", "logos"):
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(
                (
                    Path(location),
                    f"the daemon's installation ({package} at {location}; install sandboxd "
                    "outside your projects, e.g. with pipx)",
                )
            )
    if sys.prefix != sys.base_prefix:
        found.append(
            (
                Path(sys.prefix),
                f"the daemon's virtualenv {sys.prefix} (install sandboxd outside your projects, "
                "e.g. with pipx)",
            )
        )
    return found


def _engine_sockets_from_env(environ: Mapping[str, str]) -> list[Path]:
    """Sockets the daemon user's environment points at: DOCKER_HOST, rootless Docker's."""
    found = []
    docker_host = environ.get("DOCKER_HOST", "")
    if docker_host.startswith("unix://"):
        found.append(Path(docker_host.removeprefix("unix://")))
    runtime_dir = environ.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        found.append(Path(runtime_dir) / "docker.sock")
    return found


def _claim_state(config: DaemonConfig) -> StateDir:
    try:
        config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DaemonError(
            f"cannot create the state directory {config.state_dir}: {exc.strerror or exc}; "
            "set state_dir in the config to a directory you can write"
        ) from exc
    try:
        return claim_state_dir(config.state_dir)
    except StateDirError as exc:
        raise DaemonError(str(exc)) from None


def _open_audit(config: DaemonConfig) -> AuditLog:
    try:
        return AuditLog(
            config.audit_log_path,
            max_bytes=config.audit_log_max_bytes,
            backups=config.audit_log_backups,
        )
    except OSError as exc:
        raise DaemonError(exc.strerror or str(exc)) from exc


async def _serve_bound(
    config: DaemonConfig,
    config_path: Path | None,
    bound: BoundSocket,
    state: StateDir,
    audit: AuditLog,
    signals: AsyncIterator[signal.Signals],
    open_files: int,
) -> None:
    policy = daemon_policy(config, socket_path=bound.path, config_path=config_path)
    try:
        backend = build_backend(
            config,
            on_egress=audit.write_egress,
            keep_in=state,
            spec_check=spec_check(policy, config.limits),
        )
    except ValueError as exc:
        raise DaemonError(str(exc)) from exc
    async with backend:
        app = App(
            backend=backend,
            policy=policy,
            config=config,
            audit=audit,
            job_store=JobStore(state.path),
        )
        await app.restore_jobs()
        server = HttpServer(
            app,
            on_refused=app.refused,
            idle_timeout_s=config.idle_timeout_s,
            max_connections=connection_cap(config.max_connections, open_files),
        )
        listener = await anyio.abc.SocketListener.from_socket(bound.sock)
        remove = False
        async with anyio.create_task_group() as group:

            async def run_server() -> None:
                await server.serve(listener)
                group.cancel_scope.cancel()

            group.start_soon(run_server)
            print(
                f"sandboxd {sandboxd_version()} serving on {bound.path} (pid {os.getpid()}, "
                f"image {config.image}, state {config.state_dir})",
                file=sys.stderr,
                flush=True,
            )
            stopping = False
            async for signum in signals:
                name = signum.name
                remove = remove or signum == REMOVE_SIGNAL
                if not stopping:
                    stopping = True
                    logger.info(
                        "%s: stopping; running commands get %g s to finish",
                        name,
                        config.shutdown_grace_s,
                    )
                    group.start_soon(server.shutdown, config.shutdown_grace_s)
                else:
                    logger.info("%s again: killing running commands now", name)
                    server.cut_grace()
        if remove:
            logger.info("removing this daemon's sandboxes")
        else:
            await backend.detach()
