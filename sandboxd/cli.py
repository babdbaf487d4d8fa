"""The `sandboxd` command: serve, stop, doctor, status, run, mcp, build-image, gc."""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import httpx

from logos.options import DEFAULT_TIMEOUT_S, AllowedPath, ExecOptions, described_paths
from logos.options.declarations import (
    ALLOW,
    ALLOW_HOST,
    BACKGROUND_AFTER,
    DEFAULT_BACKGROUND_AFTER_S,
    DEFAULT_MAX_FORKS,
    DEFAULT_MAX_TIMEOUT_S,
    ENV,
    IMAGE,
    MAX_FORKS,
    MAX_TIMEOUT,
    NETWORK,
    TIMEOUT,
)
from logos.options.option import Option, Values, add_flag
from logos.result import Result
from sandboxd.api import API_PREFIX, GcResponse, HealthResponse, SessionsResponse
from sandboxd.client.connection import (
    daemon_client,
    error_detail,
    health as read_health,
    not_running_message,
    permission_denied,
    permission_denied_message,
)
from sandboxd.mcp.launch_file import LAUNCH_OPTIONS, LaunchFileError, load_launch_file
from sandboxd.mcp.limits import McpLaunch
from sandboxd.paths import SocketPathError, lock_path, resolve_socket_path
from sandboxd.server.config import (
    DEFAULT_IMAGE,
    ConfigError,
    DaemonConfig,
    config_file_in_use,
    load_config,
)

T = TypeVar("T")
_EXIT_USAGE = 2
_EXIT_SANDBOX_ERROR = 125
"""`sandboxd run`: the command could not run (as `docker run` does)."""
_EXIT_TIMED_OUT = 124
"""`sandboxd run`: the command timed out (as `timeout` does)."""
STOP_TIMEOUT_S = 120.0
_STOP_POLL_S = 0.1


class CliError(Exception):
    """Ends the command with this message on stderr and `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return _EXIT_USAGE
    try:
        code: int = args.handler(args)
    except CliError as exc:
        print(f"sandboxd: {exc}", file=sys.stderr)
        return exc.exit_code
    except (ConfigError, LaunchFileError, SocketPathError) as exc:
        print(f"sandboxd: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sandboxd",
        description="Run commands in Docker containers that see only the host paths you allow.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = _daemon_command(commands, "serve", _serve, help="serve the HTTP API on a Unix socket")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    _stop_command(commands)
    _daemon_command(
        commands,
        "doctor",
        _doctor,
        help="check the engine, the image, mounts, network isolation and limits",
    )
    _daemon_command(
        commands, "status", _status, config=False, help="is a daemon up on the socket; its sessions"
    )
    _run_command(commands)
    _mcp_command(commands)
    _build_image_command(commands)
    _daemon_command(
        commands,
        "gc",
        _gc,
        help="remove stray sandbox containers (through the daemon when one is up)",
    )
    return parser


def _stop_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stop = _daemon_command(
        commands,
        "stop",
        _stop,
        config=False,
        help="stop the daemon on the socket (its sandboxes keep running for the next one)",
        description="Stop the daemon serving the socket, as SIGTERM does: running commands get "
        "its shutdown_grace_s to finish, then are killed; its sandboxes, their files and their "
        "jobs keep running for the next daemon on its state directory to take over (they end "
        "themselves after its orphan_ttl_s when none comes). Waits until it has stopped.",
    )
    stop.add_argument(
        "--remove-sandboxes",
        action="store_true",
        help="remove every sandbox (their files and jobs) instead of keeping them; their "
        "sessions are told so by the next daemon",
    )
    stop.add_argument(
        "--timeout",
        type=float,
        default=STOP_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for it to stop (default {STOP_TIMEOUT_S:g})",
    )


def _run_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = _daemon_command(
        commands,
        "run",
        _run,
        config=False,
        help="run one command through the daemon (a debugging client)",
        description="Run CMD in the daemon's sandbox; prints its output and exits with its "
        "code (124: timed out, 125: could not run, 128+N: killed by signal N). One CMD "
        "argument is a shell command line; several are quoted and joined.",
    )
    run.add_argument("--session", help="session id (default: a fresh session, closed after)")
    _sandbox_options(run)
    run.add_argument("--workdir", help="working directory (inside an allowed path)")
    run.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="repeatable")
    add_flag(run, TIMEOUT)
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD")


def _mcp_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = _daemon_command(
        commands,
        "mcp",
        _mcp,
        config=False,
        help="serve the daemon's sandboxes as MCP tools (stdio, or --http on loopback)",
        description="An MCP server whose tools (run, job_status, job_wait, job_kill, fork) run "
        "commands in the daemon's sandboxes. The paths, hosts, image, env and limits given here "
        "are the widest a client may get: a client can narrow them per call, never widen them. "
        "One client keeps one sandbox session, closed when it goes.",
    )
    _sandbox_options(mcp)
    for option in (ENV, TIMEOUT, MAX_TIMEOUT, BACKGROUND_AFTER, MAX_FORKS):
        add_flag(mcp, option)
    keys = ", ".join(sorted(option.key for option in LAUNCH_OPTIONS))
    mcp.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"TOML with these options as keys ({keys}); flags add to its lists and override it",
    )
    mcp.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP on this loopback address instead of stdio "
        "(e.g. 127.0.0.1:8765); needs a token",
    )
    mcp.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="with --http: the bearer token clients must send, read from FILE (created with a "
        "fresh token, mode 0600, if missing); default: $SANDBOXD_MCP_TOKEN",
    )
    mcp.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --http: a browser Origin allowed to call (default: none); repeatable",
    )


def _build_image_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = commands.add_parser("build-image", help="build the sandbox image from the Dockerfile")
    build.add_argument(
        "--base", help="base image (default: the Dockerfile's, debian:bookworm-slim)"
    )
    build.add_argument("--tag", default=DEFAULT_IMAGE, help=f"default: {DEFAULT_IMAGE}")
    build.set_defaults(handler=_build_image)


def _daemon_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str | None = None,
    config: bool = True,
) -> argparse.ArgumentParser:
    """A command that is or asks the daemon at --socket, with --config unless `config` is
    False."""
    command = commands.add_parser(name, help=help, description=description)
    _socket_option(command)
    if config:
        _config_option(command)
    command.set_defaults(handler=handler)
    return command


def _sandbox_options(parser: argparse.ArgumentParser) -> None:
    """What the sandbox may see: paths, network, hosts, image."""
    for option in (ALLOW, NETWORK, ALLOW_HOST, IMAGE):
        add_flag(parser, option)


def _socket_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="the daemon's socket (default: $SANDBOXD_SOCKET, /run/user/UID/sandboxd.sock, "
        "~/.sandboxd/daemon.sock)",
    )


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="TOML config (default: $SANDBOXD_CONFIG or ~/.config/sandboxd/config.toml if present)",
    )


def _serve(args: argparse.Namespace) -> int:
    from sandboxd.server.daemon import DaemonError, serve

    config = load_config(args.config)
    socket_path = resolve_socket_path(args.socket)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="sandboxd: %(levelname)s %(message)s"
    )
    try:
        anyio.run(serve, config, socket_path, config_file_in_use(args.config))
    except DaemonError as exc:
        raise CliError(str(exc)) from None
    return 0


def _stop(args: argparse.Namespace) -> int:
    from sandboxd.server.daemon import REMOVE_SIGNAL

    socket_path = resolve_socket_path(args.socket)
    lock = lock_path(socket_path)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise CliError(f"no sandboxd is running on {socket_path}") from None
    except OSError as exc:
        raise CliError(f"cannot read {lock}: {exc.strerror or exc}") from None
    try:
        if not _locked(fd):
            raise CliError(f"no sandboxd is running on {socket_path}")
        pid_text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if not pid_text.isdigit():
            raise CliError(f"{lock} does not name the daemon's process: stop it by hand")
        pid = int(pid_text)
        try:
            os.kill(pid, REMOVE_SIGNAL if args.remove_sandboxes else signal.SIGTERM)
        except PermissionError:
            raise CliError(
                f"sandboxd on {socket_path} (pid {pid}) is another user's: stop it as that user"
            ) from None
        except ProcessLookupError:
            raise CliError(f"no sandboxd is running on {socket_path}") from None
        deadline = time.monotonic() + args.timeout
        # WHY both: the daemon drops its lock as it shuts down, a moment before its process
        # ends; "stopped" means the process is gone too, so a script can rely on it.
        while _locked(fd) or not _ended(pid):
            if time.monotonic() > deadline:
                raise CliError(
                    f"sandboxd (pid {pid}) did not stop within {args.timeout:g} s: see its log "
                    "(a second `sandboxd stop` cuts its grace short)"
                )
            time.sleep(_STOP_POLL_S)
    finally:
        os.close(fd)
    kept = (
        "and removed its sandboxes"
        if args.remove_sandboxes
        else "its sandboxes keep running for the next daemon on its state directory"
    )
    print(f"stopped sandboxd (pid {pid}) on {socket_path}; {kept}")
    return 0


def _ended(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie waiting for its parent has)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or its number another user's now
        return True
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone between the two looks, or no /proc to ask: the lock has spoken
    return stat_line.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def _locked(fd: int) -> bool:
    """Whether a daemon holds its socket's lock (see sandboxd.server.daemon)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _doctor(args: argparse.Namespace) -> int:
    from sandboxd.doctor import run_doctor

    config = load_config(args.config)
    socket_path = resolve_socket_path(args.socket)
    return 0 if anyio.run(run_doctor, config, socket_path) else 1


def _status(args: argparse.Namespace) -> int:
    socket_path = resolve_socket_path(args.socket)
    with _daemon_client(socket_path) as client:
        health_response = _get(client, socket_path, f"{API_PREFIX}/health")
        health = read_health(health_response)
        if health is None:
            raise CliError(_error_text(health_response))
        print(f"sandboxd {health.version} is up on {socket_path}")
        engine = f"Docker {health.engine_version}" if health.engine_version else "unreachable"
        if health.image_present:
            image = "present"
        else:
            image = "MISSING" if health.engine_version else "unknown (engine unreachable)"
        print(f"engine: {engine}; image {health.image}: {image}")
        if health.containers is not None:
            print(
                f"containers: {health.containers} of at most {health.max_sessions} "
                f"({health.max_sessions_per_caller} per caller)"
                + (f", {health.warm} of them warm" if health.warm else "")
            )
        for line in _pool_lines(health, time.time()):
            print(line)
        if health.pool_problem is not None:
            print(f"warning: the warm pool cannot fill ({health.pool_problem})")
        for problem in health.problems:
            print(f"problem: {problem}")
        sessions = SessionsResponse.model_validate_json(
            _get(client, socket_path, f"{API_PREFIX}/sessions").content
        ).sessions
    print(f"sessions: {len(sessions)}")
    now = time.time()
    for session in sessions:
        print(
            f"  {session.id}: {len(session.containers)} container(s), {session.running} "
            f"running, idle {max(0.0, now - session.last_used_at):.0f} s"
        )
    return 0 if health.ok else 1


def _pool_lines(health: HealthResponse, now: float) -> list[str]:
    """The warm pool: its size, then each spec holding warm places and its last claim."""
    if health.pool_size is None:
        return []  # an older daemon
    if health.pool_size == 0:
        return ["warm pool: off ([pool] size = 0): every new session starts a container"]
    held = sum(places.warm + places.starting for places in health.pool_places)
    memory = sum((places.warm + places.starting) * places.memory for places in health.pool_places)
    budget = f" of at most {_gib(health.pool_memory)}" if health.pool_memory is not None else ""
    lines = [
        f"warm pool: {held} of at most {health.pool_size} places held, "
        f"memory limits {_gib(memory)}{budget}"
    ]
    for places in health.pool_places:
        if places.paths is None:
            what = f"uid {places.uid}, another caller's paths"
        else:
            what = f"uid {places.uid}, " + (described_paths(places.paths) or "no paths")
        count = f"{places.warm} warm" + (f", {places.starting} starting" if places.starting else "")
        if places.last_claimed_at is None:
            claimed = "forgotten, going"
        else:
            claimed = f"last claimed {_ago(now - places.last_claimed_at)} ago"
            if not places.kept_warm:
                claimed += ", its places go to specs claimed now"
        lines.append(f"  {what}: {count}; {claimed}")
    return lines


def _gib(size: int) -> str:
    return f"{size / 1024**3:.1f} GiB"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def _run(args: argparse.Namespace) -> int:
    from sandboxd.client.runner import SandboxRunner

    words = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not words:
        raise CliError("no command given: sandboxd run [OPTIONS] -- CMD...", _EXIT_USAGE)
    command = words[0] if len(words) == 1 else shlex.join(words)
    timeout = args.timeout or DEFAULT_TIMEOUT_S
    try:
        options = ExecOptions(
            env=dict(_env_pair(item) for item in args.env),
            allowed_paths=tuple(_allowed_path(spec) for spec in args.allow),
            workdir=os.path.abspath(args.workdir) if args.workdir else None,
            allowed_hosts=tuple(args.allow_host),
            timeout_s=timeout,
        )
        runner = SandboxRunner(
            socket=args.socket,
            session=args.session,
            image=args.image,
            network=bool(args.network),
            close_session=args.session is None,
        )
    except ValueError as exc:
        raise CliError(str(exc), _EXIT_USAGE) from None

    async def run_once() -> Result:
        async with runner:
            return await runner.run(command, options)

    result = anyio.run(run_once)
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.write(result.stderr)
    for stream, dropped, saved in (
        ("stdout", result.stdout_dropped_bytes, result.stdout_file),
        ("stderr", result.stderr_dropped_bytes, result.stderr_file),
    ):
        if dropped:
            where = f"; the {stream} was saved to {saved} in the sandbox" if saved else ""
            print(f"sandboxd: {dropped} bytes of {stream} omitted{where}", file=sys.stderr)
    if result.error is not None:
        print(result.error, file=sys.stderr)
    if result.oom_killed:
        print("sandboxd: the command ran out of memory and was killed", file=sys.stderr)
    if result.timed_out:
        print(f"sandboxd: timed out after {timeout:g} s", file=sys.stderr)
        return _EXIT_TIMED_OUT
    if result.signal is not None:
        return 128 + result.signal
    if result.exit_code is None:
        return _EXIT_SANDBOX_ERROR
    return result.exit_code


def _mcp(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise CliError("sandboxd mcp needs the MCP SDK: pip install 'logos[mcp]'", _EXIT_USAGE)
    try:
        launch = _mcp_launch(args)
    except (CliError, LaunchFileError, SocketPathError) as exc:
        if args.http is not None:  # WHY: a person started it on a terminal, and reads this
            raise
        anyio.run(_serve_launch_failure, str(exc))
        return _EXIT_USAGE
    if args.http is None:
        from sandboxd.mcp.server import serve_stdio

        anyio.run(serve_stdio, launch)
        return 0
    from logos.access.token_file import TokenFileError, launch_token
    from logos.mcp.loopback_http import (
        LoopbackHttp,
        McpHttpError,
        check_loopback,
        parse_http_address,
    )
    from sandboxd.mcp.http import NAME, serve_http

    try:
        host, port = parse_http_address(args.http)
        check_loopback(NAME, host)
        token = launch_token(args.token_file, os.environ, "SANDBOXD_MCP_TOKEN")
        where = LoopbackHttp(NAME, host, port, token, tuple(args.allow_origin))
        anyio.run(serve_http, launch, where)
    except (ValueError, McpHttpError, TokenFileError) as exc:
        raise CliError(str(exc), _EXIT_USAGE) from None
    return 0


async def _serve_launch_failure(reason: str) -> None:
    """`sandboxd mcp` over stdio saying why its launch failed, with the tools a launch with
    the defaults serves."""
    from logos.mcp.launch_failure import serve_launch_failure
    from sandboxd.mcp.server import build_server

    tools = await build_server(McpLaunch(), one_client=True).list_tools()
    await serve_launch_failure("sandboxd mcp", reason, [tool.name for tool in tools])


def _mcp_launch(args: argparse.Namespace) -> McpLaunch:
    """What `sandboxd mcp` was launched with: its flags over its --config file; the daemon's
    socket resolved now, so that a path no socket can have is a launch error, not a call's."""
    file = Values() if args.config is None else load_launch_file(args.config)
    flags = Values.of(args, LAUNCH_OPTIONS)

    def given(option: Option[T], default: T) -> T:
        """The flag's value, else the file's, else `default`."""
        found = flags[option]
        if found is None:
            found = file[option]
        return default if found is None else found

    max_timeout = given(MAX_TIMEOUT, DEFAULT_MAX_TIMEOUT_S)
    env_flags = dict(_env_pair(item) for item in flags[ENV] or ())
    try:
        return McpLaunch(
            socket=str(resolve_socket_path(args.socket)),
            allowed_paths=tuple(
                _allowed_path(spec) for spec in [*(file[ALLOW] or ()), *(flags[ALLOW] or ())]
            ),
            allowed_hosts=(*(file[ALLOW_HOST] or ()), *(flags[ALLOW_HOST] or ())),
            network=bool(flags[NETWORK] or file[NETWORK]),
            image=flags[IMAGE] or file[IMAGE],
            env={**(file[ENV] or {}), **env_flags},
            default_timeout_s=min(given(TIMEOUT, DEFAULT_TIMEOUT_S), max_timeout),
            max_timeout_s=max_timeout,
            background_after_s=given(BACKGROUND_AFTER, DEFAULT_BACKGROUND_AFTER_S),
            max_forks=given(MAX_FORKS, DEFAULT_MAX_FORKS),
        )
    except SocketPathError:
        raise
    except ValueError as exc:
        raise CliError(str(exc), _EXIT_USAGE) from None


def _build_image(args: argparse.Namespace) -> int:
    from sandboxd.backend import BackendError
    from sandboxd.docker.image import build_image

    def show(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    try:
        image_id = build_image(tag=args.tag, base=args.base, on_output=show)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    print(f"built {args.tag} ({image_id})")
    return 0


def _gc(args: argparse.Namespace) -> int:
    socket_path = resolve_socket_path(args.socket)
    try:
        with _daemon_client(socket_path) as client:
            response = client.post(f"{API_PREFIX}/gc")
        if response.status_code != 200:
            raise CliError(_error_text(response))
        removed = GcResponse.model_validate_json(response.content).removed
        print(f"removed {removed} stray container(s) (through the daemon on {socket_path})")
        return 0
    except httpx.TransportError:
        pass
    config = load_config(args.config)
    anyio.run(_sweep_directly, config)
    print(f"swept the containers of stopped daemons (no daemon answers on {socket_path})")
    return 0


async def _sweep_directly(config: DaemonConfig) -> None:
    """A backend sweeps orphans when it starts (sandboxd.docker.ownership says which: never the
    containers of a live daemon); gc() then sweeps once more."""
    from sandboxd.server.backends import build_backend

    async with build_backend(config) as backend:
        await backend.gc()


def _daemon_client(socket_path: Path) -> httpx.Client:
    return daemon_client(socket_path, httpx.Timeout(60.0, connect=5.0))


def _get(client: httpx.Client, socket_path: Path, path: str) -> httpx.Response:
    try:
        response = client.get(path)
    except httpx.ConnectError as exc:
        if permission_denied(exc):
            raise CliError(permission_denied_message(socket_path)) from None
        raise CliError(not_running_message(socket_path)) from None
    except httpx.TransportError as exc:
        raise CliError(
            f"sandboxd on {socket_path} did not answer ({exc}): check its log, and restart it "
            "with `sandboxd serve` if it is stuck"
        ) from None
    if response.status_code not in (200, 503):
        raise CliError(_error_text(response))
    return response


def _error_text(response: httpx.Response) -> str:
    detail = error_detail(response)
    if detail is None:
        return f"the daemon answered HTTP {response.status_code}: {response.text[:500]}"
    return f"the daemon answered {response.status_code} {detail.code}: {detail.message}"


def _allowed_path(spec: str) -> AllowedPath:
    path, mode = spec, "ro"
    head, sep, tail = spec.rpartition(":")
    if sep and tail in ("ro", "rw"):
        path, mode = head, tail
    if not path:
        raise ValueError(f"--allow {spec!r}: give a path, e.g. --allow ./src:rw")
    return AllowedPath(path=os.path.abspath(path), read_only=mode == "ro")


def _env_pair(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise ValueError(f"--env {item!r}: write NAME=VALUE")
    return name, value
