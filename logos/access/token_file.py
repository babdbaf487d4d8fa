"""A local server's bearer token: kept in a file only its user can read, or given in the
environment, never on the command line (any user of the machine can read the process list).

WHY so strict: whoever holds the token runs commands here. So the file is opened without
following a symlink (a link lets whoever can change it choose the token, or point it at a
file of the user's whose text the attacker knows), must be a regular file owned by the user
and readable by nobody else, and is created 0600 with O_EXCL (never over a file someone
planted) in a directory created 0700. A token too short to resist guessing is refused.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from logos.access.private_dirs import make_private_dirs

_NEW_TOKEN_BYTES = 32
"""Random bytes in a token made here (43 characters once encoded)."""
_MIN_TOKEN_CHARS = 32
_MAX_TOKEN_CHARS = 1024
"""A token file holding more than this is not a token file (and is not read whole)."""
_SUGGESTED = "openssl rand -hex 24"
"""How a person makes a token long enough, for the messages."""


class TokenFileError(Exception):
    """No usable token; the message says what was wrong and what to do, never the token."""


def new_token() -> str:
    """A fresh token (`logos view` keeps its own in memory)."""
    return secrets.token_urlsafe(_NEW_TOKEN_BYTES)


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token in `path`, created with a fresh one when missing; and whether it was."""
    path = path.expanduser()
    try:
        make_private_dirs(path.parent)
    except OSError as exc:
        raise TokenFileError(
            f"cannot create {path.parent} for the token file: {exc.strerror}: choose a token "
            "file in a directory you can write"
        ) from None
    token = new_token()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:  # a symlink too, dangling or not: O_EXCL never follows one
        return read_token_file(path), False
    except OSError as exc:
        raise TokenFileError(f"cannot create the token file {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(token + "\n")
    return token, True


def read_token_file(path: Path) -> str:
    """The token in the existing file `path` (a client reads its server's this way)."""
    path = path.expanduser()
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise TokenFileError(
            f"there is no token file {path}: start the server first (it creates one), or "
            "give the right --token-file"
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise TokenFileError(
                f"the token file {path} is a symbolic link: a token file must be a regular "
                "file of yours (whoever can change a link chooses the token): name the file "
                "itself, or delete the link for a new token"
            ) from None
        raise TokenFileError(f"cannot open the token file {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        _check_private(path, info)
        data = file.read(_MAX_TOKEN_CHARS + 1)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = "\N{REPLACEMENT CHARACTER}"  # refused below, as not printable ASCII
    return _checked(text.strip(), f"the token file {path}", f"delete {path} for a new token")


def launch_token(token_file: Path | None, environ: Mapping[str, str], variable: str) -> str:
    """An MCP server's token: the one in `token_file` (created when missing), else the one
    in the environment `variable`."""
    if token_file is not None:
        return load_or_create_token(token_file)[0]
    token = environ.get(variable, "").strip()
    if not token:
        raise TokenFileError(
            f"--http needs a bearer token: set ${variable} (e.g. to $({_SUGGESTED})) or give "
            "--token-file FILE (created with a fresh token if missing)"
        )
    return _checked(token, f"${variable}", f"set it to a new one, e.g. $({_SUGGESTED})")


def _check_private(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError(
            f"the token file {path} is not a regular file: name a file, or delete it for a "
            "new token"
        )
    if info.st_uid != os.geteuid():
        raise TokenFileError(
            f"the token file {path} belongs to uid {info.st_uid}, not to you (uid "
            f"{os.geteuid()}): its owner can read and change the token; delete it for a new "
            "token of your own"
        )
    if info.st_mode & 0o077:
        raise TokenFileError(
            f"the token file {path} can be read or written by others (mode "
            f"{stat.S_IMODE(info.st_mode):o}): run chmod 600 {path}, or delete it for a new "
            "token"
        )


def _checked(token: str, where: str, remedy: str) -> str:
    """`token` if it is long enough and fits in a header; else why not, naming `where`."""
    if len(token) > _MAX_TOKEN_CHARS:
        problem = f"more than {_MAX_TOKEN_CHARS} characters"
    elif len(token) < _MIN_TOKEN_CHARS:
        problem = f"{len(token)} characters, fewer than the {_MIN_TOKEN_CHARS} a token needs"
    elif not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        problem = "characters other than printable ASCII without spaces"
    else:
        return token
    raise TokenFileError(f"{where} holds no usable token ({problem}): {remedy}")
