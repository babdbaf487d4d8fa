"""Daemons that come and go on one socket and one state directory, as a user's does when it
crashes or is upgraded: killed (`kill -9`) or stopped, then started again, for tests of what
outlives them."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.sandboxd_harness import (
    Daemon,
    containers_of,
    kept_containers,
    remove_kept,
    remove_with_volumes,
    short_dir,
    start_daemon,
)


@dataclass
class Daemons:
    """The daemons of one socket and state directory, one at a time."""

    docker_client: Any
    root: Path
    config: str
    current: Daemon | None = None
    pids: list[int] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def socket(self) -> Path:
        return self.root / "sd.sock"

    def start(self, config: str | None = None) -> Daemon:
        """A new daemon on the socket and state directory (`config`: the first one's
        unless given)."""
        assert self.current is None or self.current.proc.poll() is not None
        self.current = start_daemon(self.root, self.config if config is None else config)
        self.pids.append(self.current.proc.pid)
        return self.current

    def kill(self) -> None:
        """`kill -9` the daemon: no chance to do anything on its way out."""
        assert self.current is not None
        self.current.stop(signal.SIGKILL)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.current is not None
        return self.current.stop(sig)

    def client(self, timeout: float = 120.0) -> httpx.Client:
        assert self.current is not None
        return self.current.client(timeout)

    def run(self, command: str, session: str, **fields: Any) -> httpx.Response:
        with self.client() as http:
            return http.post("/v1/run", json={"command": command, "session": session, **fields})

    def ok(self, command: str, session: str, **fields: Any) -> dict[str, Any]:
        answer = self.run(command, session, **fields)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        assert body["error"] is None, body
        return body

    def kept(self) -> list[Any]:
        """The sandboxes kept in the state directory, running or not."""
        return kept_containers(self.docker_client, self.state_dir)

    def in_background(self, command: str, session: str) -> list[httpx.Response | Exception]:
        """POST the command from a thread (its own client, outside `clients`: a test kills
        the daemon under it); the list gets its answer or the error its client saw."""
        answers: list[httpx.Response | Exception] = []

        def post() -> None:
            transport = httpx.HTTPTransport(uds=os.fspath(self.socket))
            with httpx.Client(transport=transport, base_url="http://x", timeout=120) as http:
                try:
                    answers.append(
                        http.post("/v1/run", json={"command": command, "session": session})
                    )
                except httpx.TransportError as exc:
                    answers.append(exc)

        threading.Thread(target=post, daemon=True).start()
        return answers


@contextlib.contextmanager
def restartable(docker_client: Any, config: str = "") -> Iterator[Daemons]:
    """Daemons for one test; whatever any of them made or kept is removed after it."""
    daemons = Daemons(docker_client, short_dir("rs"), config)
    try:
        yield daemons
    finally:
        if daemons.current is not None and daemons.current.proc.poll() is None:
            daemons.current.stop(signal.SIGKILL)
        for pid in daemons.pids:
            for container in containers_of(docker_client, pid):
                with contextlib.suppress(Exception):
                    remove_with_volumes(container)
        remove_kept(docker_client, daemons.state_dir)
        shutil.rmtree(daemons.root, ignore_errors=True)
