"""sandboxd end to end: a daemon subprocess on a real socket, a real Docker engine, raw HTTP."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.memory import read_status_kib
from sandboxd.api import MAX_REQUEST_BODY_BYTES
from tests.support.processes import processes_matching, wait_for
from tests.support.sandboxd_harness import (
    Daemon,
    running_daemon,
    running_daemon_as,
    short_dir,
    start_daemon,
    wait_until_serving,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def client(daemon: Daemon) -> Iterator[httpx.Client]:
    with daemon.client() as http:
        yield http


def _run(client: httpx.Client, command: str, **fields: Any) -> httpx.Response:
    return client.post("/v1/run", json={"command": command, **fields})


def _ok(client: httpx.Client, command: str, **fields: Any) -> dict[str, Any]:
    response = _run(client, command, **fields)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _error(response: httpx.Response, status: int) -> dict[str, str]:
    assert response.status_code == status, response.text
    detail: dict[str, str] = response.json()["error"]
    assert set(detail) == {"code", "message"}
    return detail


# --- the wire protocol ------------------------------------------------------------------


def test_a_command_runs_and_its_result_comes_back_whole(client: httpx.Client) -> None:
    body = _ok(client, "echo out; echo err >&2; exit 3", session="wire")
    assert (body["stdout"], body["stderr"], body["exit_code"]) == ("out\n", "err\n", 3)
    assert body["timed_out"] is False and body["error"] is None
    assert body["sandbox"].startswith("sandboxd-")
    assert body["stripped_env_keys"] == []


def test_unknown_routes_methods_and_fields_are_json_errors(client: httpx.Client) -> None:
    assert _error(client.get("/v2/nothing"), 404)["code"] == "not_found"
    wrong_method = client.get("/v1/run")
    assert _error(wrong_method, 405)["code"] == "method_not_allowed"
    assert wrong_method.headers["allow"] == "POST"
    head = client.head("/v1/health")
    assert (head.status_code, head.headers["allow"], head.content) == (405, "GET", b"")
    unknown = _error(_run(client, "true", timeout=5), 422)
    assert "unknown field 'timeout'" in unknown["message"]
    missing = _error(client.post("/v1/run", json={}), 422)
    assert "missing field 'command'" in missing["message"]
    bad_json = client.post("/v1/run", content=b"{not json")
    assert _error(bad_json, 400)["code"] == "invalid_json"


def test_a_body_over_one_mebibyte_is_refused(client: httpx.Client) -> None:
    response = client.post("/v1/run", content=b'{"command": "' + b"x" * 1_100_000 + b'"}')
    assert _error(response, 413)["code"] == "body_too_large"


def test_health_checks_the_engine_and_the_image(client: httpx.Client) -> None:
    response = client.get("/v1/health")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True and body["image_present"] is True
    assert body["engine_version"] and body["problems"] == []


# --- mounts, identity, isolation ---------------------------------------------------------


def test_read_only_mounts_refuse_writes_and_read_write_ones_reach_the_host(
    client: httpx.Client, tmp_path: Path
) -> None:
    source, out = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    (source / "input.txt").write_text("data\n")
    body = _ok(
        client,
        f"cat input.txt; touch input2.txt; echo $? ; echo result > {out}/r.txt; pwd",
        allowed_paths=[{"path": str(source)}, {"path": str(out), "read_only": False}],
        session="mounts",
    )
    lines = body["stdout"].splitlines()
    assert lines[0] == "data" and lines[1] != "0" and lines[2] == str(source)
    assert "Read-only file system" in body["stderr"]
    assert not (source / "input2.txt").exists()
    written = out / "r.txt"
    assert written.read_text() == "result\n"
    assert (written.stat().st_uid, written.stat().st_gid) == (os.getuid(), os.getgid())


def test_workdir_is_resolved_and_confined(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    body = _ok(
        client,
        "pwd",
        allowed_paths=[{"path": str(tmp_path)}],
        workdir=str(tmp_path / "sub"),
        session="workdir",
    )
    assert body["stdout"] == f"{tmp_path / 'sub'}\n"
    outside = _run(client, "pwd", allowed_paths=[{"path": str(tmp_path / "sub")}], workdir="/tmp")
    assert "not inside any allowed path" in _error(outside, 403)["message"]


def test_the_network_is_off_and_cannot_be_asked_for(client: httpx.Client) -> None:
    body = _ok(client, "ls /sys/class/net", session="net")
    assert body["stdout"].split() == ["lo"]
    refused = _error(_run(client, "true", network=True), 403)
    assert refused["code"] == "network_refused" and "allow_network" in refused["message"]


def test_every_path_escape_is_refused(daemon: Daemon, client: httpx.Client, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "etc-link").symlink_to("/etc")
    (project / "passwd-link").symlink_to("/etc/passwd")
    (project / "socket-dir").symlink_to(daemon.socket.parent)
    attempts = {
        "relative/path": 403,
        f"{project}/../../../../etc": 403,
        str(project / "etc-link"): 403,
        str(project / "passwd-link"): 403,
        str(project / "socket-dir"): 403,
        f"/proc/self/root{project}": 403,
        "/var/run/docker.sock": 403,
        "/": 403,
        str(Path.home()): 403,
        str(project / "missing"): 403,
        f"{project}\x00/x": 400,
    }
    for path, status in attempts.items():
        response = _run(client, "true", allowed_paths=[{"path": path}])
        detail = _error(response, status)
        assert path.split("\x00")[0] in detail["message"], detail


def test_secret_looking_env_keys_are_withheld_and_reported(client: httpx.Client) -> None:
    body = _ok(
        client,
        'echo "[$FOO][$GITHUB_TOKEN][$DB_PASSWORD]"',
        env={"FOO": "bar", "GITHUB_TOKEN": "ghp_x", "DB_PASSWORD": "pw"},
        session="env",
    )
    assert body["stdout"] == "[bar][][]\n"
    assert body["stripped_env_keys"] == ["DB_PASSWORD", "GITHUB_TOKEN"]
    bad = _run(client, "true", env={"BAD NAME": "x"})
    assert _error(bad, 400)["code"] == "invalid_env"


def test_an_image_outside_the_config_is_refused(client: httpx.Client) -> None:
    refused = _error(_run(client, "true", image="alpine:latest"), 403)
    assert "allowed_images" in refused["message"]


# --- commands that misbehave -------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_background_sleep_times_out_and_leaves_nothing_behind(client: httpx.Client) -> None:
    started = time.monotonic()
    body = _ok(client, "sleep 1000 & sleep 60", timeout_s=1, session="timeout")
    assert body["timed_out"] is True and body["exit_code"] is None
    assert time.monotonic() - started < 30
    leftover = _ok(client, "ps -eo args", session="timeout")
    assert "sleep" not in leftover["stdout"]


@pytest.mark.timeout(180)
def test_32_concurrent_commands_across_8_sessions(client: httpx.Client) -> None:
    def one(index: int) -> tuple[int, dict[str, Any]]:
        return index, _ok(
            client, f"sleep 0.2; echo token-{index}", session=f"concurrent-{index % 8}"
        )

    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(one, range(32)))
    for index, body in results:
        assert body["stdout"] == f"token-{index}\n", body
    by_session: dict[str, set[str]] = {}
    for index, body in results:
        by_session.setdefault(f"concurrent-{index % 8}", set()).add(body["sandbox"])
    assert len(by_session) == 8
    sessions = {s["id"] for s in client.get("/v1/sessions").json()["sessions"]}
    assert {f"concurrent-{n}" for n in range(8)} <= sessions


def test_sessions_are_listed_and_closed(client: httpx.Client) -> None:
    _ok(client, "true", session="to-close")
    listed = {s["id"]: s for s in client.get("/v1/sessions").json()["sessions"]}
    assert listed["to-close"]["containers"] and listed["to-close"]["running"] == 0
    assert client.delete("/v1/sessions/to-close").json() == {"session": "to-close", "closed": True}
    assert _error(client.delete("/v1/sessions/to-close"), 404)["code"] == "unknown_session"
    assert _error(client.delete("/v1/sessions/bad%20id"), 400)["code"] == "invalid_session"


def test_daemon_memory_stays_bounded_during_a_yes_flood(
    daemon: Daemon, client: httpx.Client
) -> None:
    _ok(client, "true", session="flood")
    before = read_status_kib(daemon.proc.pid, "VmRSS")
    body = _ok(client, "yes | head -c 400000000", session="flood", max_output_bytes=65536)
    after = read_status_kib(daemon.proc.pid, "VmRSS")
    assert body["exit_code"] == 0
    assert body["stdout_dropped_bytes"] > 399_000_000
    assert len(body["stdout"]) < 70_000
    assert after - before < 64 * 1024, f"daemon RSS grew from {before} KiB to {after} KiB"


@pytest.mark.timeout(90)
def test_a_client_that_disconnects_kills_its_command(daemon: Daemon) -> None:
    with daemon.client() as http:
        _ok(http, "true", session="disconnect")
    with daemon.client(timeout=2.0) as impatient, pytest.raises(httpx.ReadTimeout):
        _run(impatient, "sleep 300; echo never", session="disconnect", timeout_s=600)
    with daemon.client() as http:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "sleep 300" not in _ok(http, "ps -eo args", session="disconnect")["stdout"]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the command outlived its client")


# --- temenos compatibility ---------------------------------------------------------------


def test_temenos_run_and_health_shapes(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("temenos\n")
    answer = client.post(
        "/run",
        json={
            "command": "cat f; echo e >&2; exit 4",
            "env": {"A_TOKEN": "x", "B": "y"},
            "allowed_paths": [{"path": str(tmp_path), "read_only": True}],
            "timeout": 30,
            "caller_id": "lenos:session/1",
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "stdout": "temenos\n",
        "stderr": "e\n",
        "exit_code": 4,
        "stripped_env_keys": ["A_TOKEN"],
    }
    plain = client.post("/run", json={"command": "echo hi"}).json()
    assert plain == {"stdout": "hi\n", "stderr": "", "exit_code": 0}
    timed_out = client.post("/run", json={"command": "sleep 30", "timeout": 1}).json()
    # temenos's words for a timeout: Go's context error, first on stderr.
    assert timed_out["exit_code"] == -1
    assert timed_out["stderr"].startswith("context deadline exceeded\n")
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json() == {"ok": True, "platform": sys.platform, "version": version("logos")}
    metadata_only = client.post(
        "/run",
        json={
            "command": "cat f 2>/dev/null || echo unseen",
            "allowed_paths": [{"path": str(tmp_path), "metadata_only": True}],
        },
    )
    # As temenos on Linux: accepted, and not mounted.
    assert metadata_only.json() == {"stdout": "unseen\n", "stderr": "", "exit_code": 0}
    relative = client.post("/run", json={"command": "true", "allowed_paths": [{"path": "f"}]})
    # temenos's shape for every error on its routes, its 400 for a bad request.
    assert relative.status_code == 400 and "absolute" in relative.json()["error"]


# --- audit -------------------------------------------------------------------------------


def test_every_request_is_audited(daemon: Daemon, client: httpx.Client, tmp_path: Path) -> None:
    marker = f"audit-marker-{time.monotonic_ns()}"
    _ok(client, f"echo {marker}", allowed_paths=[{"path": str(tmp_path)}], session="audit")
    _run(client, f"echo {marker}-refused", allowed_paths=[{"path": "/etc"}])
    client.post("/v1/run", content=b"x" * (MAX_REQUEST_BODY_BYTES + 1))
    assert stat.S_IMODE(daemon.audit_log.stat().st_mode) == 0o600
    records = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    ran = next(r for r in records if r["command"] == f"echo {marker}")
    assert ran["peer_uid"] == os.getuid() and ran["peer_pid"] == os.getpid()
    assert ran["status"] == 200 and ran["exit_code"] == 0 and ran["session"] == "audit"
    mounted = tmp_path.stat()
    assert ran["mounts"] == [
        {
            "path": str(tmp_path),
            "read_only": True,
            "device": mounted.st_dev,
            "inode": mounted.st_ino,
            "kind": "directory",
        }
    ]
    assert ran["network"] is False and ran["sandbox"].startswith("sandboxd-")
    refused = next(r for r in records if r["command"] == f"echo {marker}-refused")
    assert refused["status"] == 403 and "/etc" in refused["error"]
    too_large = [r for r in records if r["status"] == 413]
    assert too_large and too_large[-1]["path"] == "/v1/run"
    assert too_large[-1]["peer_uid"] == os.getuid() and "larger than" in too_large[-1]["error"]


# --- the daemon's life -------------------------------------------------------------------


def test_socket_is_private_and_its_parent_created_private(docker_client: Any) -> None:
    root = short_dir()
    socket_path = root / "new" / "sd.sock"
    with running_daemon(docker_client, socket_path=socket_path) as serving:
        assert stat.S_IMODE(os.stat(serving.socket).st_mode) == 0o600
        assert stat.S_ISSOCK(os.stat(serving.socket).st_mode)
        assert stat.S_IMODE(os.stat(socket_path.parent).st_mode) == 0o700


def test_a_stale_socket_is_replaced_and_a_live_daemon_is_refused(docker_client: Any) -> None:
    root = short_dir()
    stale = root / "stale.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(os.fspath(stale))
    with running_daemon(docker_client, socket_path=stale) as serving:
        with serving.client() as http:
            assert http.get("/v1/health").status_code == 200
        second = start_daemon(short_dir(), socket_path=stale, wait=False)
        assert second.proc.wait(60) == 1
        assert "another sandboxd is already serving" in second.output()
        assert f"(pid {serving.proc.pid})" in second.output()


def _serve_without_config(socket: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`sandboxd serve --socket SOCKET` with no config file, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "sandboxd", "serve", "--socket", str(socket)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SANDBOXD_CONFIG": str(tmp_path / "none.toml")},
    )


def test_a_file_in_the_way_and_a_long_path_are_clear_errors(tmp_path: Path) -> None:
    in_the_way = tmp_path / "notasocket"
    in_the_way.write_text("keep me")
    run = _serve_without_config(in_the_way, tmp_path)
    assert run.returncode == 1 and "is not a socket" in run.stderr
    assert in_the_way.read_text() == "keep me"
    too_long = "/tmp/" + "x" * 120 + "/sd.sock"
    run = subprocess.run(
        [sys.executable, "-m", "sandboxd", "serve", "--socket", too_long],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "must stay under 108 bytes" in run.stderr


def test_a_symlink_planted_as_the_lock_file_is_refused_and_its_target_kept(
    tmp_path: Path,
) -> None:
    target = tmp_path / "somebody-elses-file"
    target.write_text("keep me")
    socket = tmp_path / "sd.sock"
    (tmp_path / "sd.sock.lock").symlink_to(target)
    run = _serve_without_config(socket, tmp_path)
    assert run.returncode == 1, run.stderr
    assert f"cannot create the lock file {tmp_path / 'sd.sock.lock'}" in run.stderr
    assert "choose a socket path in a directory you own" in run.stderr
    assert target.read_text() == "keep me" and not socket.exists()


def test_sigterm_waits_briefly_kills_what_runs_and_keeps_the_sandboxes(
    docker_client: Any,
) -> None:
    """Stopped, the daemon leaves its sandboxes to the next one (tests/sandboxd/test_restore.py
    takes them over); the command still running after the grace is killed, its caller's
    connection ended."""
    with running_daemon(docker_client) as serving:
        with serving.client() as http:
            _ok(http, "true", session="term")
        answers: list[object] = []

        def long_command() -> None:
            # Its own client: Daemon.stop() closes the ones it handed out.
            transport = httpx.HTTPTransport(uds=os.fspath(serving.socket))
            with httpx.Client(transport=transport, base_url="http://x", timeout=120) as http:
                try:
                    answers.append(_run(http, "sleep 1300.5", session="term-long"))
                except httpx.TransportError as exc:
                    answers.append(exc)

        waiter = threading.Thread(target=long_command)
        waiter.start()
        with serving.client() as http:
            deadline = time.monotonic() + 60
            while not any(
                s["id"] == "term-long" and s["running"] == 1
                for s in http.get("/v1/sessions").json()["sessions"]
            ):
                assert time.monotonic() < deadline, serving.output()
                time.sleep(0.1)
        assert len(serving.containers(docker_client)) == 2
        assert serving.stop(timeout=60) == 0, serving.output()
        waiter.join(30)
        # Still running after the grace: killed, and the client sees the connection end.
        assert len(answers) == 1 and isinstance(answers[0], httpx.TransportError), answers
        assert not serving.socket.exists()
        kept = serving.containers(docker_client)
        assert len(kept) == 2 and all(c.status == "running" for c in kept), serving.output()
        assert wait_for(lambda: not processes_matching("sleep 1300.5"), 30)


def test_a_missing_image_is_a_503_with_the_fix(docker_client: Any) -> None:
    config = 'image = "sandboxd-test-missing:latest"\n'
    with running_daemon(docker_client, config) as serving, serving.client() as http:
        health = http.get("/v1/health")
        assert health.status_code == 503
        assert any("sandboxd build-image" in p for p in health.json()["problems"])
        run = _error(_run(http, "true"), 503)
        assert run["code"] == "image_missing" and "sandboxd build-image" in run["message"]
        assert http.get("/health").json()["ok"] is False


def test_an_unreachable_engine_is_a_503_with_the_fix() -> None:
    root = short_dir()
    serving = start_daemon(root, env={"DOCKER_HOST": f"unix://{root}/no-engine.sock"})
    try:
        with serving.client() as http:
            health = http.get("/v1/health")
            run = _error(_run(http, "true"), 503)
    finally:
        assert serving.stop() == 0
        shutil.rmtree(root, ignore_errors=True)
    assert health.status_code == 503 and health.json()["engine_version"] is None
    assert any("start it" in problem for problem in health.json()["problems"])
    assert run["code"] == "engine_unavailable" and "start it" in run["message"]


@pytest.mark.timeout(180)
def test_commands_run_as_a_non_root_caller_and_others_are_kept_out(docker_client: Any) -> None:
    uid = gid = 1000
    with running_daemon_as(docker_client, uid) as (serving, user):
        work = serving.socket.parent / "work"
        work.mkdir()
        os.chown(work, uid, gid)
        assert os.stat(serving.socket).st_uid == uid
        socket, allow = str(serving.socket), f"{work}:rw"
        run = user.sandboxd(
            "run", "--socket", socket, "--allow", allow, "--", "id -u; id -g; echo hi > made-here"
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [str(uid), str(gid)]
        made = work / "made-here"
        assert (made.stat().st_uid, made.stat().st_gid) == (uid, gid)

    with running_daemon(docker_client) as root_daemon:
        refused = user.sandboxd("run", "--socket", str(root_daemon.socket), "true", timeout=60)
        assert refused.returncode == 125
        assert "permission denied" in refused.stderr


def test_wait_until_serving_reports_a_daemon_that_died(tmp_path: Path) -> None:
    broken = start_daemon(short_dir(), "limits = 5\n", wait=False)
    with pytest.raises(AssertionError, match="exited with 2"):
        wait_until_serving(broken)


def test_short_dirs_are_removed_when_the_test_process_exits() -> None:
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tests.support.sandboxd_harness import short_dir; print(short_dir())",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    path = Path(made.stdout.strip())
    assert path.parent == Path("/tmp") and not path.exists()
