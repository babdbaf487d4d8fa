"""A small real HTTP server on TCP that speaks the temenos daemon's JSON, for what sandboxd's
temenos routes cannot show: TCP addresses (sandboxd serves a Unix socket only), the auth
token a client sends (sandboxd accepts it unused), and a background threshold of a second.

It is a test double of the wire, not of the work: each command runs for real in bash, in its
own process group, which a timeout or a DELETE kills; answers have temenos's shapes
(`/run`: stdout, stderr, exit_code or job_id + status "background"; `/jobs/{id}`: id,
command, status running | completed | killed, exit_code omitted when 0, stdout, stderr;
errors `{"error": "…"}`). There is no sandbox: give it only harmless commands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class _Job:
    id: str
    command: str
    process: subprocess.Popen[str]
    status: str = "running"
    stdout: str = ""
    stderr: str = ""
    done: threading.Event = field(default_factory=threading.Event)
    killed: bool = False

    def kill(self) -> None:
        self.killed = True
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def info(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "id": self.id,
            "command": self.command,
            "status": self.status,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "started_at": "2026-01-01T00:00:00Z",
        }
        if self.process.returncode:
            answer["exit_code"] = self.process.returncode if self.process.returncode > 0 else -1
        return answer


@dataclass
class TemenosServer:
    background_after_s: float
    echo_token_refusal: bool = False
    """Refuse every /run with a message that quotes its auth token, as a careless (or
    hostile) daemon might."""
    requests: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    """(method, path, JSON body) of each request, in arrival order."""
    jobs: dict[str, _Job] = field(default_factory=dict)
    port: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def run_bodies(self) -> list[dict[str, Any]]:
        return [body for method, path, body in self.requests if path == "/run" and body]

    def start(self, body: dict[str, Any]) -> _Job:
        paths = body.get("allowed_paths") or []
        process = subprocess.Popen(
            ["bash", "-c", body["command"]],
            cwd=paths[0]["path"] if paths else None,
            env={"PATH": os.environ["PATH"], **(body.get("env") or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        job = _Job(id=f"{len(self.jobs) + 1:06x}", command=body["command"], process=process)
        self.jobs[job.id] = job
        threading.Thread(
            target=self._wait, args=(job, body.get("timeout") or 600), daemon=True
        ).start()
        return job

    def _wait(self, job: _Job, timeout: float) -> None:
        """Collect the output as it comes (a job's state shows its output so far), kill the
        group at the timeout."""
        readers = [
            threading.Thread(target=_collect, args=(job, name), daemon=True)
            for name in ("stdout", "stderr")
        ]
        for reader in readers:
            reader.start()
        try:
            job.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.kill()
            job.process.wait()
        for reader in readers:
            reader.join()
        job.status = "killed" if job.killed else "completed"
        job.done.set()


def _collect(job: _Job, name: str) -> None:
    stream = getattr(job.process, name)
    for line in iter(stream.readline, ""):
        setattr(job, name, getattr(job, name) + line)


def _handler(server: TemenosServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> dict[str, Any] | None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            server.requests.append((self.command, self.path, body))
            return body

        def do_GET(self) -> None:
            self._record()
            if self.path == "/health":
                self._answer(200, {"ok": True, "platform": "linux", "version": "test"})
            elif self.path.startswith("/jobs/") and self.path[6:] in server.jobs:
                self._answer(200, server.jobs[self.path[6:]].info())
            else:
                self._answer(404, {"error": "job not found"})

        def do_DELETE(self) -> None:
            self._record()
            job = server.jobs.get(self.path.removeprefix("/jobs/"))
            if job is None:
                self._answer(404, {"error": "job not found"})
            elif job.done.is_set():
                self._answer(409, {"error": "job already completed"})
            else:
                job.kill()
                job.done.wait(10)
                self._answer(200, job.info())

        def do_POST(self) -> None:
            body = self._record()
            if self.path != "/run" or not body or not body.get("command"):
                self._answer(400, {"error": "command is required"})
                return
            if server.echo_token_refusal:
                self._answer(403, {"error": f"token {body.get('auth_token')} is not allowed"})
                return
            job = server.start(body)
            if job.done.wait(server.background_after_s):
                answer = job.info()
                self._answer(
                    200,
                    {
                        "stdout": answer["stdout"],
                        "stderr": answer["stderr"],
                        "exit_code": answer.get("exit_code", 0),
                    },
                )
            else:
                self._answer(200, {"job_id": job.id, "status": "background"})

    return Handler


@contextmanager
def temenos_server(
    background_after_s: float = 30.0, *, echo_token_refusal: bool = False
) -> Iterator[TemenosServer]:
    """The server on 127.0.0.1 (a free port), until the block ends; its jobs are killed then."""
    state = TemenosServer(background_after_s, echo_token_refusal)
    http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = http.server_address[1]
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        http.shutdown()
        http.server_close()
        for job in state.jobs.values():
            job.kill()
