"""A secret token for a daemon, given as is or read from a file that may be replaced.

Kubernetes mounts a service account's token as a file and rotates it by swapping the file;
a long run must send the current one, so the file is read again whenever its identity
(device, inode, size, modification time) changes. The token itself never appears in a
message, a repr or a log line: errors name the file, never its content.

WHY not `logos.access.token_file`'s rules (no symlink, the user's own, 0600): those guard a
token this user's server accepts. This one is a credential the daemon issued, sent to it, and
Kubernetes mounts it through a symlink into `..data/`, owned by root, 0644 unless told
otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

_MAX_TOKEN_BYTES = 64 * 1024
"""A service-account JWT is a few KiB; anything far larger is not a token file."""


class TokenError(Exception):
    """The token cannot be read; the message names the file and the fix, never the token."""


@dataclass(eq=False)
class AuthToken:
    """A token given directly (`value`) or kept in a file (`path`), or no token at all."""

    value: str | None = field(default=None, repr=False)
    path: str | None = None
    _identity: tuple[int, int, int, int] | None = field(default=None, init=False, repr=False)
    _cached: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.value is not None and self.path is not None:
            raise ValueError("give the auth token or the file that holds it, not both")

    def current(self) -> str:
        """The token to send now ("" when there is none); TokenError when the file fails."""
        if self.path is None:
            return self.value or ""
        try:
            info = os.stat(self.path)
            identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            if identity != self._identity:
                self._cached = self._read()
                self._identity = identity
        except OSError as exc:
            raise TokenError(
                f"cannot read the auth token file {self.path}: {exc.strerror}: check the path "
                "and that it is readable by this user"
            ) from None
        return self._cached

    def _read(self) -> str:
        assert self.path is not None
        with open(self.path, "rb") as file:
            data = file.read(_MAX_TOKEN_BYTES + 1)
        if len(data) > _MAX_TOKEN_BYTES:
            raise TokenError(
                f"the auth token file {self.path} holds more than {_MAX_TOKEN_BYTES} bytes: it "
                "is not a token file"
            )
        try:
            token = data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise TokenError(
                f"the auth token file {self.path} is not text: a token is printable ASCII"
            ) from None
        if not token:
            raise TokenError(f"the auth token file {self.path} is empty")
        return token

    def scrub(self, text: str) -> str:
        """`text` with the token (if it appears, e.g. echoed by a daemon) replaced."""
        for secret in (self.value, self._cached):
            if secret:
                text = text.replace(secret, "[auth token]")
        return text
