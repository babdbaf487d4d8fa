"""The bearer token of an MCP server over HTTP (`sandboxd mcp --http`, `logos mcp --http`):
from an environment variable or a file of the caller's own (created 0600 with a fresh token when
missing), never from the command line, where any user of the machine could read it in the
process list."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

MIN_TOKEN_CHARS = 16


class TokenError(Exception):
    """No usable token; the message says what to do."""


def launch_token(token_file: Path | None, environ: Mapping[str, str], variable: str) -> str:
    """The token in `token_file`, else in the environment `variable`; TokenError if none."""
    if token_file is None:
        token = environ.get(variable, "").strip()
        if not token:
            raise TokenError(
                f"--http needs a bearer token: set ${variable} or give --token-file FILE "
                "(created with a fresh token if missing)"
            )
        return _checked(token, f"${variable}")
    path = token_file.expanduser().resolve()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(32) + "\n")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(
            f"{path} can be read by other users (mode {stat.S_IMODE(mode):o}): chmod 600 it"
        )
    return _checked(path.read_text().strip(), str(path))


def _checked(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise TokenError(
            f"the token in {where} must be at least {MIN_TOKEN_CHARS} characters without spaces"
        )
    return token
