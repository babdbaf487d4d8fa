"""`logos serve`: resolve the settings as `logos run` does (config file, environment,
flags), then hand them to the server (`logos.serve`).

The server needs the optional extra `serve` (Starlette and uvicorn); without it the command
says how to install it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from logos.access.token_file import TokenFileError, load_or_create_token
from logos.agent.config import Config
from logos.ceiling import CeilingError, ceiling_of
from logos.cli.errors import EXIT_OK, CliError
from logos.cli.model import local_gguf, open_model
from logos.cli.paths import audit_log_path, memory_path, serve_dir
from logos.cli.serve_address import ServeAddress, address_path, record_address, remove_address
from logos.commands.memory import memory_commands
from logos.commands.memory_store import MemoryStore
from logos.errors import SettingsError
from logos.options import ExecOptions
from logos.options.declarations import (
    DEFAULT_SANDBOX_KIND,
    DOWNLOAD_MODELS,
    IMAGE,
    SANDBOX,
    SANDBOX_TOKEN_FILE,
    SOCKET,
    YES,
)
from logos.options.option import Values
from logos.protocol.prompt import PromptStyle
from logos.records.trajectory import Trajectory
from logos.runners.base import Runner
from logos.runners.sandboxes import SandboxSettings
from logos.serve.setup import ModelInfo, RunnerChoice, ServerSetup
from logos.settings import model_choice, resolution
from logos.settings.config_file import load_config_file
from logos.settings.model_choice import GgufSpec, HubModelSpec, LocalModel
from logos.settings.resolution import config_path
from logos.settings.runners import RunnerSpec, make_runner, sandbox_problem
from logos.settings.serve_table import ServeSettings
from logos.version import logos_version

if TYPE_CHECKING:  # WHY: Starlette and uvicorn are optional; the command imports them late
    from logos.serve.server import Listener

INSTALL_HINT = (
    "logos serve needs Starlette and uvicorn, which are not installed: pip install 'logos[serve]'"
)


@dataclass(frozen=True)
class _Runners:
    """The server's runners, opened as the `logos` command opens them."""

    config: Values
    prompt_style: PromptStyle = "full"

    @property
    def sandbox_kind(self) -> str:
        """The kind of the server's sandbox: its config's `sandbox`, else the default."""
        return resolution.sandbox_choice(self.config[SANDBOX]) or DEFAULT_SANDBOX_KIND

    def spec(self, choice: RunnerChoice) -> RunnerSpec:
        kind = self.sandbox_kind
        asked = SandboxSettings(
            socket=self.config[SOCKET],
            image=self.config[IMAGE],
            network=choice.network,
            allowed_hosts=choice.allowed_hosts,
            auth_token_file=self.config[SANDBOX_TOKEN_FILE],
        )
        return RunnerSpec(kind if choice.sandbox else None, asked)

    def problem(self, choice: RunnerChoice) -> str | None:
        if not choice.sandbox:
            return None
        try:
            problem = sandbox_problem(self.spec(choice))
        except SettingsError as exc:
            problem = exc.message
        if problem is None:
            return None
        # WHY: `--socket` here is where logos serve itself listens, not the sandbox's daemon.
        return f"{problem} (logos serve reaches the sandbox's daemon at its config's `socket`)"

    def open(self, choice: RunnerChoice) -> Runner:
        return make_runner(self.spec(choice))

    def system_prompt(
        self, choice: RunnerChoice, options: ExecOptions, continued: Trajectory | None
    ) -> str:
        memory = MemoryStore(memory_path(os.environ))
        return resolution.system_prompt(
            self.spec(choice), options, self.config, continued, memory, self.prompt_style
        )


def serve_command(args: argparse.Namespace, flags: Values, environ: Mapping[str, str]) -> int:
    _require_server_extra()
    from logos.serve.server import serve

    config = load_config_file(config_path(flags), environ)
    served = config.serve
    chosen = model_choice.choose_model(flags, config, environ, None)
    local, choice = chosen.local, chosen.provider
    if chosen.note:
        print(f"logos: {chosen.note}", file=sys.stderr)
    rules = resolution.approval_rules(flags, config)
    replies = resolution.replies(flags, config, choice)
    limits = resolution.limits(flags, config)
    options = resolution.exec_options(flags, config, os.getcwd())
    try:
        # WHY pinned now: the server's own paths are every served run's ceiling (the sandbox
        # holds each mount to them, however a path was swapped since).
        options = dataclasses.replace(options, path_ceiling=ceiling_of(options.allowed_paths))
    except CeilingError as exc:
        raise CliError(str(exc)) from None
    state = serve_dir(environ)
    try:
        token, created = load_or_create_token(state / "token")
    except TokenFileError as exc:
        raise CliError(str(exc)) from None
    listener = _listener(args, served)
    memory = MemoryStore(memory_path(environ))
    gguf = None if local is None else _local_gguf(local, flags, config, environ)
    with open_model(choice, gguf) as model:
        template = Config(
            provider=model.provider,
            model=model.model,
            exec_options=options,
            loop_commands=memory_commands(memory),
        )
        template = replies.apply(limits.applied_to(template))
        runners = _Runners(config, replies.prompt_style)
        setup = ServerSetup(
            settings=served,
            template=template,
            model=ModelInfo(model.provider.name, model.model, model.base_url, model.gguf),
            runners=runners,
            state_dir=state,
            audit_path=audit_log_path(environ),
            memory=memory,
            rules=rules,
            logos_version=logos_version(),
            workdir=os.getcwd(),
        )

        record = address_path(environ)
        address = ServeAddress(
            url=_client_url(listener),
            token_file=str(state / "token"),
            pid=os.getpid(),
            sandbox=runners.sandbox_kind,
        )

        def announce() -> None:
            record_address(record, address)
            _announce(listener, token, state / "token", created, served, args.allow_remote)
            print(
                f"logos serve: `logos project …` finds it through {record}",
                file=sys.stderr,
                flush=True,
            )

        async def main() -> None:
            try:
                await serve(setup, token, listener, announce)
            finally:
                with anyio.CancelScope(shield=True):
                    await model.provider.aclose()

        try:
            anyio.run(main)
        finally:
            remove_address(record, address.pid)
    return EXIT_OK


def _require_server_extra() -> None:
    """The server's modules import (starlette, uvicorn), or the install hint."""
    try:
        import logos.serve.server  # noqa: F401
    except ImportError as exc:
        if exc.name in ("starlette", "uvicorn") or str(exc.name).startswith(
            ("starlette.", "uvicorn.")
        ):
            raise CliError(INSTALL_HINT) from None
        raise


def _listener(args: argparse.Namespace, served: ServeSettings) -> Listener:
    """Where to listen: --socket (or the config's), else --host and --port (or the config's)."""
    from logos.serve.server import BindError, bind_tcp, bind_unix

    socket_path = args.listen_socket or served.socket
    try:
        if socket_path:
            return bind_unix(Path(socket_path).expanduser())
        port = served.port if args.port is None else args.port
        return bind_tcp(args.host or served.host, port, allow_remote=args.allow_remote)
    except BindError as exc:
        raise CliError(str(exc)) from None


def _local_gguf(
    local: LocalModel, flags: Values, config: Values, environ: Mapping[str, str]
) -> GgufSpec:
    """The local model's file, fetched first if need be (asking on a terminal)."""
    if isinstance(local, HubModelSpec) and local.default:
        print(
            f"logos serve: no API key, base URL or --gguf: running the default local model "
            f"{local.file}",
            file=sys.stderr,
        )
    terminal = sys.stdin.isatty() and sys.stderr.isatty()
    accepted = bool(flags[YES] or config[DOWNLOAD_MODELS])
    return local_gguf(local, ask=terminal and not accepted, plain=False, environ=environ)


def _client_url(listener: Listener) -> str:
    """Where a client on this machine reaches `listener`: loopback for an address that
    stands for every interface."""
    if listener.unix_path is not None:
        return listener.url
    scheme, _, rest = listener.url.partition("://")
    host, _, port = rest.rpartition(":")
    if host in ("", "0.0.0.0", "[::]"):
        host = "[::1]" if host == "[::]" else "127.0.0.1"
    return f"{scheme}://{host}:{port}"


def _announce(
    listener: Listener,
    token: str,
    token_path: Path,
    created: bool,
    served: ServeSettings,
    allow_remote: bool,
) -> None:
    made = "created" if created else "read"
    lines = [f"logos serve: the bearer token is in {token_path} ({made}; keep it private)"]
    if listener.unix_path is not None:
        lines.append(
            f"logos serve: serving on {listener.unix_path} (0600): curl --unix-socket "
            f'{listener.unix_path} -H "Authorization: Bearer $(cat {token_path})" '
            "http://logos/v1/sessions"
        )
    else:
        if allow_remote:
            lines.append(
                "logos serve: WARNING: listening beyond this machine (--allow-remote): anyone "
                "who reaches this address with the token runs commands here, and HTTP is not "
                "encrypted, so the token can be read on the way"
            )
        lines.append(f"logos serve: serving on {listener.url}")
        lines.append(f"logos serve: open the page at {listener.url}/#token={token}")
    lines.append(
        f"logos serve: at most {served.max_concurrent_runs} runs at once; "
        "Ctrl-C stops it (runs are canceled and saved)"
    )
    print("\n".join(lines), file=sys.stderr, flush=True)
