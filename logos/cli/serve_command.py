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
from logos.cli import settings as resolve
from logos.cli.errors import EXIT_OK, CliError
from logos.cli.model import local_gguf, open_model
from logos.cli.paths import audit_log_path, memory_path, serve_dir
from logos.cli.runners import DEFAULT_SANDBOX_KIND, RunnerSpec, make_runner, sandbox_problem
from logos.cli.serve_address import ServeAddress, address_path, record_address, remove_address
from logos.cli.settings import FileSettings, Flags, HubModelSpec
from logos.commands.memory import memory_commands
from logos.commands.memory_store import MemoryStore
from logos.options import ExecOptions
from logos.protocol.prompt import PromptStyle
from logos.records.trajectory import Trajectory
from logos.runners.base import Runner
from logos.runners.sandboxes import SandboxSettings
from logos.serve.settings import ServeSettings
from logos.serve.setup import ModelInfo, RunnerChoice, ServerSetup
from logos.version import logos_version

if TYPE_CHECKING:  # WHY: Starlette and uvicorn are optional; the command imports them late
    from logos.serve.server import Listener

INSTALL_HINT = (
    "logos serve needs Starlette and uvicorn, which are not installed: pip install 'logos[serve]'"
)


@dataclass(frozen=True)
class _Runners:
    """The server's runners, opened as the `logos` command opens them."""

    settings: FileSettings
    prompt_style: PromptStyle = "full"

    @property
    def sandbox_kind(self) -> str:
        """The kind of the server's sandbox: its config's `sandbox`, else the default."""
        return resolve.sandbox_choice(self.settings.sandbox) or DEFAULT_SANDBOX_KIND

    def spec(self, choice: RunnerChoice) -> RunnerSpec:
        kind = self.sandbox_kind
        asked = SandboxSettings(
            socket=self.settings.socket,
            image=self.settings.image,
            network=choice.network,
            allowed_hosts=choice.allowed_hosts,
            auth_token_file=self.settings.sandbox_token_file,
        )
        return RunnerSpec(kind if choice.sandbox else None, asked)

    def problem(self, choice: RunnerChoice) -> str | None:
        if not choice.sandbox:
            return None
        try:
            problem = sandbox_problem(self.spec(choice))
        except CliError as exc:
            problem = exc.message
        if problem is None:
            return None
        # WHY: `--socket` here is where logos serve itself listens, not the sandbox's daemon.
        return f"{problem} (logos serve reaches the sandbox's daemon at its config's `socket`)"

    def open(self, choice: RunnerChoice) -> Runner:
        try:
            return make_runner(self.spec(choice))
        except CliError as exc:
            raise ValueError(exc.message) from None

    def system_prompt(
        self, choice: RunnerChoice, options: ExecOptions, continued: Trajectory | None
    ) -> str:
        memory = MemoryStore(memory_path(os.environ))
        return resolve.system_prompt(
            self.spec(choice), options, self.settings, continued, memory, self.prompt_style
        )


def serve_command(args: argparse.Namespace, flags: Flags, environ: Mapping[str, str]) -> int:
    try:
        from logos.serve.server import BindError, bind_tcp, bind_unix, serve
    except ImportError as exc:
        if exc.name in ("starlette", "uvicorn") or str(exc.name).startswith(
            ("starlette.", "uvicorn.")
        ):
            raise CliError(INSTALL_HINT) from None
        raise
    settings = resolve.load_file_settings(flags.config, environ)
    served = settings.serve
    local = resolve.local_model(flags, settings, environ, None)
    choice = (
        None if local is not None else resolve.choose_provider_for(flags, settings, environ, None)
    )
    if choice is not None:
        choice, note = resolve.resolve_model(choice)
        if note:
            print(f"logos: {note}", file=sys.stderr)
    rules = resolve.approval_rules(flags, settings)
    replies = resolve.replies(flags, settings, choice)
    limits = resolve.limits(flags, settings)
    options = resolve.exec_options(flags, settings, os.getcwd())
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
    try:
        socket_path = args.listen_socket or served.socket
        listener: Listener = (
            bind_unix(Path(socket_path).expanduser())
            if socket_path
            else bind_tcp(
                args.host or served.host,
                served.port if args.port is None else args.port,
                allow_remote=args.allow_remote,
            )
        )
    except BindError as exc:
        raise CliError(str(exc)) from None
    memory = MemoryStore(memory_path(environ))
    gguf = None
    if local is not None:
        if isinstance(local, HubModelSpec) and local.default:
            print(
                f"logos serve: no API key, base URL or --gguf: running the default local model "
                f"{local.file}",
                file=sys.stderr,
            )
        terminal = sys.stdin.isatty() and sys.stderr.isatty()
        accepted = flags.yes or bool(settings.download_models)
        gguf = local_gguf(local, ask=terminal and not accepted, plain=False, environ=environ)
    with open_model(choice, gguf) as model:
        template = Config(
            provider=model.provider,
            model=model.model,
            exec_options=options,
            loop_commands=memory_commands(memory),
        )
        template = replies.apply(limits.applied_to(template))
        runners = _Runners(settings, replies.prompt_style)
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
