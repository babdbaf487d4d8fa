"""temenos as a logos sandbox kind, registered under the entry points `logos.sandboxes`.

Any daemon that speaks temenos's API will do: temenos itself, or sandboxd (whose temenos
routes answer the same JSON on its socket).
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError

from logos.options import described_paths
from logos.runners.auth_token import AuthToken, TokenError
from logos.runners.sandboxes import SandboxKind, SandboxSettings
from logos.temenos.address import AddressError, TemenosAddress, resolve_address
from logos.temenos.api import HealthResponse
from logos.temenos.client import CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S
from logos.temenos.runner import TemenosRunner


class TemenosKind:
    """Commands run by a temenos daemon, found as temenos's own client finds it."""

    name = "temenos"
    description = (
        "a temenos daemon (seatbelt on macOS, bubblewrap on Linux) or anything speaking its "
        "API, such as sandboxd"
    )
    platform = "a temenos sandbox on the daemon's machine (`uname -a` tells which), shell bash"

    def open(self, settings: SandboxSettings) -> TemenosRunner:
        if settings.image is not None:
            raise ValueError(
                "a temenos daemon runs commands on its own machine, not in an image: leave "
                "out --image"
            )
        if settings.unix_sockets:
            raise ValueError("temenos's API has no unix_sockets option: leave it out")
        return TemenosRunner(
            _address(settings),
            network=settings.network,
            caller_id=settings.session,
            auth_token=_token(settings),
        )

    def problem(self, settings: SandboxSettings) -> str | None:
        """The daemon's health, asked for real (GET /health), and the token file readable."""
        try:
            address = _address(settings)
            _token(settings).current()
        except (ValueError, TokenError) as exc:
            return str(exc)
        timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        try:
            with address.client(timeout) as client:
                response = client.get("/health")
        except httpx.HTTPError as exc:
            return (
                f"cannot reach a temenos daemon at {address} ({exc or type(exc).__name__}): "
                "start it (`temenos daemon`), or give its address with --sandbox-addr (else "
                "$TEMENOS_LISTEN_ADDR, $TEMENOS_SOCKET_PATH, ~/.temenos/daemon.sock)"
            )
        try:
            health = HealthResponse.model_validate_json(response.content)
        except ValidationError:
            return (
                f"something at {address} answered GET /health with HTTP "
                f"{response.status_code} but is not a temenos daemon: check --sandbox-addr"
            )
        if not health.ok:
            return (
                f"the temenos daemon at {address} is not healthy (HTTP {response.status_code}, "
                '"ok": false): check its log'
            )
        return None

    def where(self, settings: SandboxSettings) -> str:
        try:
            return str(_address(settings))
        except AddressError:
            return str(settings.socket)

    def prompt_note(self, settings: SandboxSettings) -> str:
        paths = described_paths(settings.allowed_paths)
        network = (
            "was asked for (the daemon's configuration has the last word)"
            if settings.network
            else "was not asked for: assume there is none, and do not try to download anything"
        )
        return (
            f"Commands run in a temenos sandbox that sees only these host paths: {paths}. "
            f"Network access {network}."
        )


def _address(settings: SandboxSettings) -> TemenosAddress:
    return resolve_address(settings.socket)


def _token(settings: SandboxSettings) -> AuthToken:
    return AuthToken(path=settings.auth_token_file)


TEMENOS: SandboxKind = TemenosKind()
"""The object the entry point `temenos` names."""
