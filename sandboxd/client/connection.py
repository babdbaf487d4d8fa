"""One client for the daemon's socket: how to connect to it, and what a failure means.

SandboxRunner, the `sandboxd` command (status, gc, doctor) and the logos sandbox kind (its
health check) all reach the daemon through here, so a failure is explained the same way
wherever it shows.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from sandboxd.api import API_PREFIX, ErrorDetail, ErrorResponse, HealthResponse
from sandboxd.paths import SOCKET_ENV, default_socket_path

BASE_URL = "http://sandboxd"
"""The host part of every request: the socket is the address, the name is a placeholder."""
_HEALTH_TIMEOUT_S = 10.0


def daemon_client(socket_path: Path, timeout: httpx.Timeout | float) -> httpx.Client:
    return httpx.Client(**_client_options(httpx.HTTPTransport, socket_path, timeout))


def async_daemon_client(socket_path: Path, timeout: httpx.Timeout | float) -> httpx.AsyncClient:
    return httpx.AsyncClient(**_client_options(httpx.AsyncHTTPTransport, socket_path, timeout))


def _client_options(
    transport: type[httpx.HTTPTransport] | type[httpx.AsyncHTTPTransport],
    socket_path: Path,
    timeout: httpx.Timeout | float,
) -> dict[str, Any]:
    """What either client is made with: the socket's transport, the placeholder host, and
    no proxy from the environment."""
    # WHY verify=False: the daemon speaks plain HTTP on its Unix socket, so no TLS handshake
    # ever happens; the default would load the CA store for nothing, 25 ms or more of CPU per
    # client (one client per sandbox runner: a batch opens one per task).
    # WHY trust_env=False: the socket is the address; proxy settings never apply to it.
    return {
        "transport": transport(uds=os.fspath(socket_path), verify=False),
        "base_url": BASE_URL,
        "timeout": timeout,
        "trust_env": False,
    }


def permission_denied(exc: BaseException) -> bool:
    """Whether connecting failed because the socket is not the caller's to use (EACCES)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError):
            return seen.errno == errno.EACCES
        seen = seen.__cause__ or seen.__context__
    return False


def permission_denied_message(socket_path: Path) -> str:
    return (
        f"cannot connect to sandboxd on {socket_path}: permission denied (the socket is "
        "private to the user running the daemon): run as that user, or start your "
        "own daemon with `sandboxd serve`"
    )


def not_running_message(socket_path: Path) -> str:
    """No daemon answers on `socket_path`: where that socket came from, how to start a daemon
    there, and how to name one that listens elsewhere (the same words from every client)."""
    if socket_path == Path(os.path.abspath(default_socket_path())):
        named = f"named by ${SOCKET_ENV}" if os.environ.get(SOCKET_ENV) else "the default socket"
        where, start = f"{socket_path} ({named})", "`sandboxd serve`"
    else:
        where, start = f"{socket_path}", f"`sandboxd serve --socket {socket_path}`"
    return (
        f"sandboxd is not running on {where}: start it with {start}, or pass --socket PATH "
        f"(or set ${SOCKET_ENV}) to reach a daemon that listens elsewhere"
    )


def error_detail(response: httpx.Response) -> ErrorDetail | None:
    """The daemon's `{"error": …}` of a refusal; None when the answer is not one."""
    try:
        return ErrorResponse.model_validate_json(response.content).error
    except ValidationError:
        return None


def health(response: httpx.Response) -> HealthResponse | None:
    """A GET /v1/health answer; None when whatever answered is not sandboxd."""
    try:
        return HealthResponse.model_validate_json(response.content)
    except ValidationError:
        return None


@dataclass(frozen=True)
class HealthCheck:
    """What GET /v1/health said: the answer when sandboxd gave one, and what stands in the
    way of running commands, with the fix (None when nothing does)."""

    answer: HealthResponse | None
    problem: str | None
    reached: bool
    """Something answered on the socket (a daemon, though perhaps an unhealthy one)."""


def check_health(socket_path: Path) -> HealthCheck:
    """Ask the daemon on `socket_path` whether it can run commands, for real."""
    try:
        with daemon_client(socket_path, _HEALTH_TIMEOUT_S) as client:
            response = client.get(f"{API_PREFIX}/health")
    except httpx.HTTPError as exc:
        if permission_denied(exc):
            return HealthCheck(None, permission_denied_message(socket_path), reached=True)
        return HealthCheck(None, not_running_message(socket_path), reached=False)
    answer = health(response)
    if answer is None:
        return HealthCheck(
            None,
            f"something on {socket_path} answered HTTP {response.status_code} but is not "
            "sandboxd: check --socket, or start the daemon with `sandboxd serve`",
            reached=True,
        )
    if answer.ok:
        return HealthCheck(answer, None, reached=True)
    problems = "; ".join(answer.problems) or "no details given"
    return HealthCheck(
        answer, f"sandboxd on {socket_path} cannot run commands: {problems}", reached=True
    )


def health_problem(socket_path: Path) -> str | None:
    """Why sandboxd on `socket_path` cannot run commands now, with the fix; None when it can."""
    return check_health(socket_path).problem
