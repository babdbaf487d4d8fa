"""A real `logos serve` in a subprocess on a free port (real uvicorn), and real clients of
it: JSON requests and server-sent event streams read with httpx."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.cli_harness import Home, openai_env
from tests.support.processes import log_text, start_logged, stop_server, wait_started
from tests.support.sse_server import ScriptedServer, openai_stream

_SERVING = re.compile(r"serving on (\S+)")


@dataclass
class Served:
    """One `logos serve` process."""

    proc: subprocess.Popen[bytes]
    home: Home
    log: Path
    url: str = ""
    """`http://HOST:PORT`, or the path of a Unix socket."""
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def token_path(self) -> Path:
        return self.home.state / "serve" / "token"

    @property
    def token(self) -> str:
        return self.token_path.read_text().strip()

    def output(self) -> str:
        return log_text(self.log)

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        headers = {"authorization": f"Bearer {self.token if token is None else token}"}
        client = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, verify=client_tls()
        )
        self.clients.append(client)
        return client

    def start_run(self, client: httpx.Client, **body: Any) -> dict[str, Any]:
        response = client.post("/v1/runs", json=body)
        assert response.status_code == 201, response.text
        started: dict[str, Any] = response.json()
        return started

    def wait_finished(
        self, client: httpx.Client, run_id: str, timeout: float = 30
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
            if status["status"] != "running":
                return status
            time.sleep(0.05)
        raise AssertionError(f"run {run_id} did not finish within {timeout} s")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` and wait for the exit status."""
        return stop_server(self.proc, "logos serve", self.output, sig, timeout, self.clients)


@functools.cache
def client_tls() -> ssl.SSLContext:
    """httpx's default TLS settings, made once for every client of the tests: each client
    would make its own, reading the CA certificates again (20 ms of CPU)."""
    return httpx.create_ssl_context()


def start_serve(
    home: Home,
    model: ScriptedServer,
    args: Sequence[str] = (),
    *,
    config: str = "",
    env: Mapping[str, str] | None = None,
    wait: bool = True,
) -> Served:
    """`python -m logos serve --port 0 --model m ARGS` talking to `model`."""
    if config:
        home.config_file.parent.mkdir(parents=True, exist_ok=True)
        home.config_file.write_text(config)
    log = home.root / f"serve-{time.monotonic_ns()}.log"
    argv = [sys.executable, "-m", "logos", "serve", "--port", "0", "--model", "m", *args]
    environment = {**openai_env(home, model), **(env or {})}
    proc = start_logged(argv, log=log, cwd=home.work, env=environment)
    served = Served(proc, home, log)
    if wait:
        wait_serving(served)
    return served


def wait_serving(served: Served, timeout: float = 30) -> None:
    def serving() -> bool:
        found = _SERVING.search(served.output())
        if found:
            served.url = found.group(1)
        return found is not None

    wait_started(served.proc, "logos serve", served.output, serving, timeout)


@contextlib.contextmanager
def serving(
    home: Home, model: ScriptedServer, args: Sequence[str] = (), **options: Any
) -> Iterator[Served]:
    served = start_serve(home, model, args, **options)
    try:
        yield served
    finally:
        if served.proc.poll() is None:
            served.stop()


@dataclass(frozen=True)
class Received:
    id: int
    type: str
    data: dict[str, Any]


def read_events(client: httpx.Client, run_id: str, **options: Any) -> list[Received]:
    """The run's event stream, read as `read_stream` reads one (`options` are its own)."""
    return read_stream(client, f"/v1/runs/{run_id}/events", **options)


def read_stream(
    client: httpx.Client,
    path: str,
    *,
    last_event_id: int | None = None,
    stop_after: int | None = None,
    comments: list[str] | None = None,
    until: Callable[[Received], bool] | None = None,
) -> list[Received]:
    """The event stream at `path` until it ends, `stop_after` events or an event `until`
    accepts (then hang up)."""
    headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}
    events: list[Received] = []
    with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                if comments is not None:
                    comments.append(line)
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
                continue
            if "data" in fields:
                number = int(fields["id"]) if "id" in fields else 0
                event = Received(number, fields["event"], json.loads(fields["data"]))
                events.append(event)
                if stop_after is not None and len(events) >= stop_after:
                    break
                if until is not None and until(event):
                    break
            fields = {}
    return events


AUTO_LOCAL = "check_back = false\n[serve]\nallow_local_auto = true\n"
"""A server config whose runs may run local commands unasked (`approval: auto`)."""
JOB_AFTER_HALF_A_SECOND = "background_after = 0.5\n" + AUTO_LOCAL
"""With it, a command still running after 0.5 s goes on as a job."""


def sandboxd_config(socket: Path) -> str:
    """A server config whose sandbox runs go to the sandboxd daemon at `socket`."""
    return f'check_back = false\nsocket = "{socket}"\n'


def sandbox_in_work(home: Home, **more: Any) -> dict[str, Any]:
    """A run's `runner`: a sandbox that sees `home.work` read-write (`more`: its other fields)."""
    return {
        "kind": "sandbox",
        "allowed_paths": [{"path": str(home.work), "read_only": False}],
        **more,
    }


def script_a_build_that_goes_on_as_a_job(model: ScriptedServer) -> None:
    """A model whose command outlives `background_after` (0.5 s), waits for it, and answers."""
    model.enqueue(
        openai_stream("Building.\n<cmd>echo started; sleep 1.5; echo built</cmd>"),
        openai_stream("Waiting.\n<cmd>wait %1</cmd>"),
        openai_stream("It built."),
    )
