"""The server's bearer token: created once, kept private, required on every API request.

WHY a token even on loopback: any local program, and any web page the user opens (through
the browser), can reach 127.0.0.1; the server runs commands, so only someone who can read a
file private to the user may talk to it.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from logos.errors import RecordFileError
from logos.jsonl import make_private_dir

TOKEN_BYTES = 32


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token stored at `path`, created (0600) when missing; and whether it was created.

    A token file others can read, or that is not a regular file of this user, is refused:
    whoever read it could run commands here.
    """
    make_private_dir(path.parent)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return _read_private(path), False
    except OSError as exc:
        raise RecordFileError(f"cannot create the token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token, True


def _read_private(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise RecordFileError(
            f"cannot open the token file {path}: {exc.strerror}: delete it and start the "
            "server again to create a new token"
        ) from None
    with os.fdopen(fd, encoding="ascii", errors="replace") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise RecordFileError(
                f"the token file {path} is not a regular file of yours: delete it and start "
                "the server again"
            )
        if info.st_mode & 0o077:
            raise RecordFileError(
                f"the token file {path} can be read by others (mode "
                f"{stat.S_IMODE(info.st_mode):o}): run chmod 600 {path}, or delete it for a "
                "new token"
            )
        token = handle.read(4 * TOKEN_BYTES).strip()
    if len(token) < TOKEN_BYTES:
        raise RecordFileError(
            f"the token file {path} holds no usable token: delete it and start the server again"
        )
    return token


def bearer_matches(header: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time."""
    if header is None:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def allowed_hosts(host: str) -> frozenset[str]:
    """The names a browser may call this server by: loopback's, and the address it was
    told to listen on.

    WHY: a web page whose own name resolves to 127.0.0.1 (DNS rebinding) reaches the server
    with its own name in `Host`; refusing names we were not given keeps it out even before
    the token check.
    """
    return LOOPBACK_NAMES | {host.strip("[]").lower()}


def host_name(header: str) -> str:
    """The name in a `Host` header, without its port (`[::1]:80` → `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def same_origin(origin: str, host: str) -> bool:
    """Whether a request's `Origin` is this server (`http://` + the `Host` it was sent to).

    WHY on every request that changes something: a page on another origin can send a
    request (a form, a fetch without reading the answer); it cannot send the token, but a
    second lock costs nothing.
    """
    return origin.strip().lower() == f"http://{host.strip().lower()}"
