"""sandboxd's temenos routes against what the temenos daemon answers, over the real socket with
the real engine.

Each row is one request a temenos client can send and the answer temenos gives, read from
its daemon's handler and job table (internal/daemon/handler.go, jobs.go, socket.go) and its
client (client/client.go): status codes, field names, omitted empty fields, defaults. Where
sandboxd deliberately answers otherwise (containment), the row says what sandboxd answers
and the README's compatibility table says why.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.sandboxd_harness import Daemon, running_daemon

pytestmark = pytest.mark.docker

JOB_ID = re.compile(r"^[0-9a-f]{6,}$")
"""temenos's job ids: fmt.Sprintf("%06x", seq)."""
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
Check = Callable[[Any], None]


@dataclass(frozen=True)
class Row:
    """One request and temenos's answer: its status and either the exact JSON body or a check
    of it."""

    name: str
    method: str
    path: str
    body: Any
    status: int
    answer: Any = None
    check: Check | None = None
    raw: bytes | None = None
    """Sent as is instead of `body` (what a client's encoder cannot produce)."""


def _error_saying(*words: str) -> Check:
    def check(answer: Any) -> None:
        assert list(answer) == ["error"], answer
        for word in words:
            assert word in answer["error"], answer

    return check


def _stderr_starts(line: str, stdout: str) -> Check:
    def check(answer: Any) -> None:
        assert answer["exit_code"] == -1 and answer["stdout"] == stdout, answer
        assert answer["stderr"].startswith(line + "\n"), answer

    return check


def _health(answer: Any) -> None:
    assert answer["ok"] is True and answer["platform"] == "linux", answer
    assert set(answer) == {"ok", "platform", "version"}


def _rows(tmp: Path) -> list[Row]:
    ro, rw, hidden = tmp / "ro", tmp / "rw", tmp / "meta"
    return [
        Row("health", "GET", "/health", None, 200, check=_health),
        Row("run", "POST", "/run", {"command": "echo hi"}, 200,
            {"stdout": "hi\n", "stderr": "", "exit_code": 0}),
        # No validation of the command: `bash -c ""` exits 0.
        Row("empty command", "POST", "/run", {"command": ""}, 200,
            {"stdout": "", "stderr": "", "exit_code": 0}),
        Row("exit code and stderr", "POST", "/run", {"command": "echo e >&2; exit 3"}, 200,
            {"stdout": "", "stderr": "e\n", "exit_code": 3}),
        # timeout <= 0 is the default (20 minutes), never a refusal.
        Row("negative timeout", "POST", "/run", {"command": "echo ok", "timeout": -5}, 200,
            {"stdout": "ok\n", "stderr": "", "exit_code": 0}),
        Row("zero timeout", "POST", "/run", {"command": "echo ok", "timeout": 0}, 200,
            {"stdout": "ok\n", "stderr": "", "exit_code": 0}),
        # A timeout: exit -1, Go's context error first on stderr, the output so far.
        Row("timeout", "POST", "/run", {"command": "echo before; sleep 30", "timeout": 1}, 200,
            check=_stderr_starts("context deadline exceeded", "before\n")),
        # A signal: exit -1 (Go's ExitCode() of a signalled process), no extra line.
        Row("killed by a signal", "POST", "/run", {"command": "echo x >&2; kill -9 $$"}, 200,
            {"stdout": "", "stderr": "x\n", "exit_code": -1}),
        # Go's decoder ignores unknown fields; auth_token is for its Kubernetes mode.
        Row("unknown fields", "POST", "/run",
            {"command": "echo ok", "future": [1], "auth_token": "t", "network": False}, 200,
            {"stdout": "ok\n", "stderr": "", "exit_code": 0}),
        Row("any caller id", "POST", "/run",
            {"command": "echo ok", "caller_id": "lenos:session/1 ü"}, 200,
            {"stdout": "ok\n", "stderr": "", "exit_code": 0}),
        Row("invalid JSON", "POST", "/run", None, 400, raw=b"{not json"),
        # timeout is a Go int: a string or a fraction does not decode.
        Row("timeout as a string", "POST", "/run", {"command": "true", "timeout": "5"}, 400),
        Row("fractional timeout", "POST", "/run", {"command": "true", "timeout": 1.5}, 400),
        Row("relative path", "POST", "/run",
            {"command": "true", "allowed_paths": [{"path": "rel", "read_only": True}]}, 400,
            check=_error_saying("path must be absolute")),
        Row("invalid env name", "POST", "/run", {"command": "true", "env": {"1A": "x"}}, 400,
            check=_error_saying("1A")),
        Row("env value with a line break", "POST", "/run",
            {"command": "true", "env": {"A": "x\ny"}}, 400, check=_error_saying("A")),
        Row("env stripped", "POST", "/run",
            {"command": "echo $B${A_TOKEN:-}", "env": {"A_TOKEN": "x", "B": "y"}}, 200,
            {"stdout": "y\n", "stderr": "", "exit_code": 0, "stripped_env_keys": ["A_TOKEN"]}),
        # The first allowed path is the working directory.
        Row("workdir", "POST", "/run",
            {"command": "pwd; cat f", "allowed_paths": [{"path": str(ro), "read_only": True}]},
            200, {"stdout": f"{ro}\nread-only\n", "stderr": "", "exit_code": 0}),
        Row("read-only path", "POST", "/run",
            {"command": f"touch {ro}/new 2>/dev/null || echo refused",
             "allowed_paths": [{"path": str(ro), "read_only": True}]},
            200, {"stdout": "refused\n", "stderr": "", "exit_code": 0}),
        Row("read-write path", "POST", "/run",
            {"command": f"echo w > {rw}/new && cat {rw}/new",
             "allowed_paths": [{"path": str(rw), "read_only": False}]},
            200, {"stdout": "w\n", "stderr": "", "exit_code": 0}),
        # metadata_only: accepted, and (as temenos's bwrap does) not mounted.
        Row("metadata_only path", "POST", "/run",
            {"command": f"cat {hidden}/f 2>/dev/null || echo unseen",
             "allowed_paths": [{"path": str(rw), "read_only": False},
                               {"path": str(hidden), "read_only": True,
                                "metadata_only": True}]},
            200, {"stdout": "unseen\n", "stderr": "", "exit_code": 0}),
        Row("unknown job", "GET", "/jobs/ffffff", None, 404,
            check=_error_saying("job not found")),
        Row("kill an unknown job", "DELETE", "/jobs/ffffff", None, 404,
            check=_error_saying("job not found")),
        Row("bad status filter", "GET", "/jobs?status=sleeping", None, 400,
            {"error": 'invalid job status "sleeping"'}),
        Row("status all", "GET", "/jobs?status=all&caller_id=nobody", None, 200, []),
        Row("wrong method", "GET", "/run", None, 405),
        Row("unknown route", "GET", "/nowhere", None, 404),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def daemon(docker_client: Any) -> Iterator[Daemon]:
    """Jobs after 1 s instead of temenos's 30, so the job rows run quickly."""
    with running_daemon(docker_client, "temenos_background_after_s = 1\n") as serving:
        yield serving


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("conformance")
    for name in ("ro", "rw", "meta"):
        (root / name).mkdir()
    (root / "ro" / "f").write_text("read-only\n")
    (root / "meta" / "f").write_text("secret\n")
    return root


def _send(http: httpx.Client, row: Row) -> httpx.Response:
    if row.raw is not None:
        return http.request(row.method, row.path, content=row.raw)
    return http.request(row.method, row.path, json=row.body)


@pytest.mark.parametrize(
    "index", range(len(_rows(Path("/x")))), ids=[r.name for r in _rows(Path("/x"))]
)
def test_a_request_gets_temenos_s_answer(daemon: Daemon, tree: Path, index: int) -> None:
    row = _rows(tree)[index]
    with daemon.client() as http:
        response = _send(http, row)
    assert response.status_code == row.status, response.text
    if row.answer is not None:
        assert response.json() == row.answer
    if row.check is not None:
        row.check(response.json())


def _until_ended(http: httpx.Client, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = http.get(f"/jobs/{job_id}").json()
        if job["status"] != "running":
            return dict(job)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end")


def test_a_job_shows_what_temenos_shows_from_start_to_end(daemon: Daemon) -> None:
    with daemon.client() as http:
        run = {"command": "echo early; echo e >&2; sleep 3; echo late", "caller_id": "c-1"}
        started = http.post("/run", json=run).json()
        job_id = started["job_id"]
        # RunResponse's stdout, stderr and exit_code are not omitempty; the job id is %06x.
        assert started == {
            "stdout": "", "stderr": "", "exit_code": 0, "job_id": job_id, "status": "background"
        }  # fmt: skip
        assert JOB_ID.fullmatch(job_id)
        # A running job shows no output (snapshot gives output only once done).
        running = http.get(f"/jobs/{job_id}").json()
        assert running == {
            "id": job_id,
            "caller_id": "c-1",
            "command": run["command"],
            "status": "running",
            "started_at": running["started_at"],
        }
        assert RFC3339.fullmatch(running["started_at"])
        ended = _until_ended(http, job_id)
        # exit_code 0 is omitted (omitempty), completed_at is set.
        assert ended == {
            "id": job_id,
            "caller_id": "c-1",
            "command": run["command"],
            "status": "completed",
            "stdout": "early\nlate\n",
            "stderr": "e\n",
            "started_at": running["started_at"],
            "completed_at": ended["completed_at"],
        }
        # GET /jobs lists without output (snapshot(false)), filtered by caller and status.
        listed = http.get("/jobs", params={"caller_id": "c-1"}).json()
        assert listed == [{k: v for k, v in ended.items() if k not in ("stdout", "stderr")}]
        assert http.get("/jobs", params={"caller_id": "c-1", "status": "running"}).json() == []
        # Stopping an ended job: 409.
        again = http.delete(f"/jobs/{job_id}")
        assert again.status_code == 409 and again.json() == {"error": "job already completed"}


def test_a_killed_job_and_a_timed_out_job_say_so_as_temenos_does(daemon: Daemon) -> None:
    with daemon.client() as http:
        first = http.post("/run", json={"command": "echo out; sleep 600", "caller_id": "c-2"})
        second = http.post("/run", json={"command": "sleep 600", "timeout": 3})
        killed_id, timed_out_id = first.json()["job_id"], second.json()["job_id"]
        # Ids count up in hex.
        assert int(timed_out_id, 16) == int(killed_id, 16) + 1
        killed = http.delete(f"/jobs/{killed_id}")
        assert killed.status_code == 200
        # sandboxd answers once the kill took (temenos answers at once, maybe still running).
        body = killed.json()
        assert body["status"] == "killed" and body["exit_code"] == -1
        assert body["stdout"] == "out\n" and body["stderr"] == "context canceled\n"
        timed_out = _until_ended(http, timed_out_id)
        assert (timed_out["status"], timed_out["exit_code"]) == ("killed", -1)
        assert timed_out["stderr"] == "context deadline exceeded\n"
        assert "stdout" not in timed_out
