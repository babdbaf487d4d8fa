"""Serve the application with uvicorn on a socket bound here, and stop cleanly.

WHY bind here: uvicorn's own Unix socket is made 0666 (anyone on the machine could connect);
bound here under a umask it is 0600 from the start, and uvicorn serves it as it is. A TCP
address other than loopback is refused unless asked for: a run executes commands.

Stopping (SIGINT, SIGTERM, SIGHUP) first cancels the runs and waits until each is saved,
which also ends their event streams, then stops uvicorn.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from anyio.abc import TaskGroup
from starlette.types import ASGIApp

from logos.access.names import AllowedHosts, allowed_hosts, is_loopback
from logos.jsonl import make_private_dir
from logos.serve.app import build_app
from logos.serve.approvals import Approvals, RuleBook
from logos.serve.connections import connection_cap, guarded_protocol, open_files_limit
from logos.serve.filechanges.tracker import ChangeTrackers
from logos.serve.projects.registry import Projects
from logos.serve.runs import Runs
from logos.serve.sessions import SessionStore
from logos.serve.setup import ServerSetup

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACEFUL_S = 5.0
"""After the runs are saved, how long open connections get to finish."""
_STARTED_POLL_S = 0.02
_VIEW_CONNECTIONS = 64
"""Connections a `logos view` page server holds (one person's browser)."""
_SNAPSHOTS_DIR = "snapshots"
"""In the server's state directory: the snapshots behind the diffs of what runs changed
(each server's own, removed as it stops)."""
_PAGE_RULES_FILE = "approval-rules.toml"
"""In the server's state directory: the rules the page adds when no rules file is configured."""


class BindError(Exception):
    """The address cannot be served: the message says why and what to do."""


@dataclass(frozen=True)
class Listener:
    sock: socket.socket
    url: str
    """Where clients reach it (`unix:PATH` for a socket)."""
    unix_path: Path | None = None
    hosts: AllowedHosts | None = None
    """The names `Host` may give: loopback's and the address listened on (any address of
    this machine for an unspecified one); None on a Unix socket, which no browser reaches."""


def bind_tcp(host: str, port: int, *, allow_remote: bool) -> Listener:
    if not is_loopback(host) and not allow_remote:
        raise BindError(
            f"{host} is not a loopback address: anyone who can reach it and holds the token "
            "could run commands on this machine. Serve on 127.0.0.1 (and reach it through an "
            "SSH tunnel), or pass --allow-remote if you mean it"
        )
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        sock = socket.create_server((address, port), family=family)
    except OSError as exc:
        # WHY os.strerror: create_server's own message adds the address again, in a tuple.
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise BindError(
            f"cannot listen on {host}:{port}: {reason}: choose another --port (0 picks a free "
            "one) or --host"
        ) from None
    bound_port = sock.getsockname()[1]
    shown = f"[{address}]" if family == socket.AF_INET6 else address
    return Listener(sock, f"http://{shown}:{bound_port}", hosts=allowed_hosts(address))


def bind_unix(path: Path) -> Listener:
    """A Unix socket created 0600 (under a umask, so never more open than that)."""
    make_private_dir(path.parent)
    _remove_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _umask(0o177):
            sock.bind(os.fspath(path))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BindError(
            f"cannot listen on {path}: {exc.strerror}: choose another --socket path, in a "
            "directory you can write"
        ) from None
    return Listener(sock, f"unix:{path}", unix_path=path)


def _remove_stale_socket(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise BindError(f"{path} exists and is not a socket: choose another --socket path")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(os.fspath(path))
        except OSError:
            path.unlink()  # left by a server that is gone
            return
    raise BindError(f"a server already listens on {path}: stop it, or choose another path")


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: `serve` stops it after saving the runs."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _uvicorn(app: ASGIApp, max_connections: int) -> _Server:
    """uvicorn with the connection bounds, no access log (no request line is ever logged)
    and no lifespan: the caller owns what the app needs."""
    config = uvicorn.Config(
        app,
        lifespan="off",
        http=guarded_protocol(connection_cap(max_connections, open_files_limit())),
        ws="none",
        access_log=False,
        log_level="warning",
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=int(GRACEFUL_S),
    )
    return _Server(config)


async def _started(group: TaskGroup, server: _Server, listener: Listener) -> None:
    """Start serving `listener` in `group`; return once uvicorn accepts connections."""
    group.start_soon(server.serve, [listener.sock])
    while not server.started:
        await anyio.sleep(_STARTED_POLL_S)


async def serve(
    setup: ServerSetup, token: str, listener: Listener, on_ready: Callable[[], None]
) -> None:
    """Serve until a stop signal; then cancel and save the runs, and stop."""
    settings = setup.settings
    rule_book = RuleBook.open(setup.rules, setup.state_dir / _PAGE_RULES_FILE)
    if rule_book.problem is not None:
        print(f"logos serve: warning: {rule_book.problem}", file=sys.stderr, flush=True)
    sessions = SessionStore(setup.state_dir / "sessions")
    approvals = Approvals(settings.approval_ttl_s)
    trackers = ChangeTrackers(setup.state_dir / _SNAPSHOTS_DIR)
    runs = Runs(setup, sessions, approvals, rule_book, trackers)
    projects = Projects(setup, approvals, rule_book, rule_book, trackers)
    app = build_app(
        setup,
        token,
        runs,
        approvals,
        hosts=listener.hosts,
        rule_book=rule_book,
        projects=projects,
        trackers=trackers,
    )
    server = _uvicorn(app, settings.max_connections)
    try:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async with anyio.create_task_group() as group:
                runs.bind(group)
                projects.bind(group)
                for problem in projects.problems:
                    print(
                        f"logos serve: warning: a project cannot be read: {problem}",
                        file=sys.stderr,
                        flush=True,
                    )
                await _started(group, server, listener)
                on_ready()
                async for _ in signals:
                    break
                await projects.shutdown()
                await runs.shutdown()
                server.should_exit = True
    finally:
        trackers.close()
        listener.sock.close()
        if listener.unix_path is not None:
            with contextlib.suppress(OSError):
                listener.unix_path.unlink()


async def serve_page(app: ASGIApp, listener: Listener, on_ready: Callable[[], None]) -> None:
    """Serve a page with no runs behind it (`logos view`) until a stop signal."""
    server = _uvicorn(app, _VIEW_CONNECTIONS)
    try:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async with anyio.create_task_group() as group:
                await _started(group, server, listener)
                on_ready()
                async for _ in signals:
                    break
                server.should_exit = True
    finally:
        listener.sock.close()
