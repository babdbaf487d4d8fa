"""Where sandboxd lives on disk: the socket the daemon and its clients agree on, the state dir.

Light imports only: the logos client resolves the socket with this module too.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

SOCKET_ENV = "SANDBOXD_SOCKET"
"""Environment variable naming the daemon's socket (after `--socket`, before the defaults)."""

_MAX_SOCKET_PATH_BYTES = 107
"""`sun_path` holds 108 bytes on Linux, one of which is the terminating NUL."""


class SocketPathError(ValueError):
    """The socket path cannot be used (too long for a Unix socket, or empty)."""


def default_socket_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$SANDBOXD_SOCKET`, else `sandboxd.sock` in the user's runtime directory (`/run/user/UID`),
    else `~/.sandboxd/daemon.sock`: the daemon binds it and every client looks there.

    WHY not `$XDG_RUNTIME_DIR`: an editor starts `sandboxd mcp` (and an agent `logos`) with
    an environment of its own, often without it, and a default read from it would then name
    another socket than the one `sandboxd serve` chose in a login shell. The runtime
    directory is found from the uid instead, the same in every process of the user.
    """
    env = os.environ if environ is None else environ
    if env.get(SOCKET_ENV):
        return Path(env[SOCKET_ENV]).expanduser()
    runtime_dir = user_runtime_dir()
    if runtime_dir is not None:
        return runtime_dir / "sandboxd.sock"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".sandboxd" / "daemon.sock"


def user_runtime_dir() -> Path | None:
    """`/run/user/UID` when it is this user's own private directory (systemd and elogind make
    it at login, and set XDG_RUNTIME_DIR to it); None where there is none (macOS, containers)."""
    uid = os.getuid()
    path = Path(f"/run/user/{uid}")
    try:
        info = path.lstat()
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not info.st_mode & 0o077
    return path if private else None


def resolve_socket_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The socket to use: the explicit one (e.g. `--socket`), else the default; made absolute.

    Raises SocketPathError when the path cannot be a Unix socket address.
    """
    if explicit is not None and not str(explicit):
        raise SocketPathError("the socket path is empty: pass a file path such as /tmp/sd.sock")
    path = Path(explicit).expanduser() if explicit is not None else default_socket_path()
    path = Path(os.path.abspath(path))
    check_socket_path_length(path)
    return path


def check_socket_path_length(path: Path) -> None:
    """Refuse a path the kernel would truncate, with the fix in the message."""
    size = len(os.fsencode(path))
    if size > _MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(
            f"socket path {path} is {size} bytes long; Unix socket paths must stay under "
            f"{_MAX_SOCKET_PATH_BYTES + 1} bytes: choose a shorter path with --socket or "
            f"${SOCKET_ENV}"
        )


def lock_path(socket_path: Path) -> Path:
    """The lock file next to a daemon's socket (held for the daemon's life)."""
    return socket_path.with_name(socket_path.name + ".lock")


def open_lock_file(lock: Path, refuse: Callable[[str], Exception]) -> int:
    """A lock file beside the socket, 0600, opened without following a symlink planted in
    its place; when it cannot be, `refuse` gets what went wrong and what to do."""
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise refuse(
            f"cannot create the lock file {lock}: {exc.strerror or exc}; choose a socket path "
            "in a directory you own (--socket)"
        ) from None


def take_pid_lock(
    fd: int, lock: Path, refuse: Callable[[str], Exception], *, held: Callable[[str], str]
) -> None:
    """Lock the open lock file `fd` (`lock`) for this process (the lock lives as long as it
    does) and write its pid in it. Another process holding it: `refuse(held(" (pid N)"))`,
    naming that process; any other failure: `refuse` says which."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            raise refuse(held(f" (pid {holder})" if holder else "")) from None
        raise refuse(f"cannot lock {lock}: {exc.strerror or exc}") from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/sandboxd` when XDG_STATE_HOME is set, else `~/.sandboxd`."""
    env = os.environ if environ is None else environ
    state_home = env.get("XDG_STATE_HOME")
    if state_home:
        return Path(state_home) / "sandboxd"
    home = env.get("HOME")  # WHY from `env`: a daemon started with it finds its home there
    return (Path(home) if home else Path.home()) / ".sandboxd"
