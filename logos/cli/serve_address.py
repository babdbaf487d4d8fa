"""Where a running `logos serve` listens, for the commands that talk to it (`logos project …`).

The server records its address (a URL, or `unix:PATH`), the file holding its token and its
sandbox kind in a private file of its state directory once it serves, and removes it when it
stops; a client on the same machine and user reads it when neither `--url` nor
`$LOGOS_SERVE_URL` names a server. So `logos serve --port 0` (or any port, or a socket) is
found without flags, and a client that finds nothing says what it tried.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from logos.cli.paths import serve_dir
from logos.jsonl import replace_private_file
from logos.settings.serve_table import DEFAULT_PORT

URL_ENV = "LOGOS_SERVE_URL"
_DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
_ADDRESS_FILE = "address.json"
_MAX_RECORD_BYTES = 64 * 1024


class ServeAddress(BaseModel):
    """What `logos serve` records while it serves."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str
    """`http://HOST:PORT`, or `unix:PATH` for a server on a Unix socket."""
    token_file: str
    pid: int
    sandbox: str
    """The sandbox kind its sandboxed runs and agents use (its config's `sandbox`)."""


def address_path(environ: Mapping[str, str]) -> Path:
    return serve_dir(environ) / _ADDRESS_FILE


def record_address(path: Path, address: ServeAddress) -> None:
    """Write the record (0600, replaced whole: a reader never sees half of it)."""
    replace_private_file(path, address.model_dump_json() + "\n")


def remove_address(path: Path, pid: int) -> None:
    """Remove the record if it is still `pid`'s (a server started since wrote its own)."""
    recorded = _read_address(path)
    if recorded is not None and recorded.pid == pid:
        with contextlib.suppress(OSError):
            path.unlink()


def _read_address(path: Path) -> ServeAddress | None:
    """The record at `path`; None when there is none or it cannot be read."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(_MAX_RECORD_BYTES)
    except OSError:
        return None
    try:
        return ServeAddress.model_validate_json(text)
    except ValidationError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has that pid now: not our server
        return False
    return True


@dataclass(frozen=True)
class ServerChoice:
    """The server a client talks to, and why that one."""

    url: str
    token_file: Path
    source: str
    """Where the address came from, in words (`--url`, `$LOGOS_SERVE_URL`, the record…)."""
    sandbox: str | None = None
    """The server's sandbox kind, when its record says (a server found through it)."""
    stale: str | None = None
    """A record left by a server that is gone, described (it was not used)."""
    by_default: bool = False
    """Nothing named a server nor recorded one: the default address, a guess."""


def choose_server(
    url: str | None, token_file: str | None, environ: Mapping[str, str]
) -> ServerChoice:
    """`--url`, else `$LOGOS_SERVE_URL`, else the address a running `logos serve` recorded,
    else the default address; the token: `--token-file`, else the record's, else the state
    directory's."""
    record_file = address_path(environ)
    recorded = _read_address(record_file)
    if recorded is not None and not _alive(recorded.pid):
        stale = (
            f"{record_file} names a logos serve (pid {recorded.pid}, at {recorded.url}) that "
            "is no longer running"
        )
        recorded = None
    else:
        stale = None
    given_token = Path(token_file).expanduser() if token_file else None
    for named, source in ((url, "given with --url"), (environ.get(URL_ENV), f"from ${URL_ENV}")):
        if named:
            known = recorded if recorded is not None and recorded.url == named else None
            return ServerChoice(
                named,
                given_token or _token_file(known, environ),
                source,
                sandbox=None if known is None else known.sandbox,
            )
    if recorded is not None:
        return ServerChoice(
            recorded.url,
            given_token or _token_file(recorded, environ),
            f"recorded by logos serve (pid {recorded.pid}) in {record_file}",
            sandbox=recorded.sandbox,
        )
    return ServerChoice(
        _DEFAULT_URL,
        given_token or _token_file(None, environ),
        f"the default address: no running logos serve recorded one in {record_file}",
        stale=stale,
        by_default=True,
    )


def _token_file(recorded: ServeAddress | None, environ: Mapping[str, str]) -> Path:
    """The recorded server's token file, else the one `logos serve` keeps in its state dir."""
    return Path(recorded.token_file) if recorded is not None else serve_dir(environ) / "token"


def unreachable(choice: ServerChoice, reason: str) -> str:
    """What a client says when nothing answers at `choice`: what it tried, and what to do."""
    stale = f"; {choice.stale}" if choice.stale else ""
    return (
        f"no logos serve answers at {choice.url} ({choice.source}{stale}): {reason}. Start one "
        f"with `logos serve`, or name the one that runs with --url URL (or ${URL_ENV}; a Unix "
        "socket's path works too)"
    )
