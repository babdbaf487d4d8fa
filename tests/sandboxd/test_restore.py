"""A sandboxd restart loses nothing: sessions, their files and their running jobs outlive the
daemon (killed or stopped), and the next one on the same socket and state directory answers
for them; what did not make it (removed or stopped behind its back, no longer allowed by its
policy, ended for want of a daemon) is answered with why, never as an empty sandbox.

Real daemons, a real engine, raw HTTP. The engine's own restart is reproduced by what it
leaves behind, containers stopped (`docker kill`) or removed (`docker rm`) while no daemon
runs, rather than by restarting dockerd under other engineers' tests: the daemon sees only
the engine's containers and their states, so that is the same to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from tests.support.local_http import LocalHTTPServer
from tests.support.processes import processes_matching, wait_for
from tests.support.restarts import Daemons, restartable
from tests.support.sandboxd_harness import (
    REPO,
    kept_volumes,
    short_dir,
    start_daemon,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]


def _lost(answer: httpx.Response) -> str:
    assert answer.status_code == 410, answer.text
    error = answer.json()["error"]
    assert error["code"] == "session_lost", error
    return str(error["message"])


def _job(daemons: Daemons, job_id: str, **params: Any) -> dict[str, Any]:
    with daemons.client() as http:
        answer = http.get(f"/v1/jobs/{job_id}", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _sandbox_of(daemons: Daemons, session: str) -> str:
    return str(daemons.ok("true", session)["sandbox"])


def _sandboxd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandboxd", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )


def test_a_killed_daemon_leaves_its_sessions_files_and_jobs_to_the_next(
    docker_client: Any, marker: str
) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        kept = daemons.ok("echo kept > /tmp/kept; echo home > ~/home", "s1")["sandbox"]
        job = daemons.ok(
            "echo started; sleep 2; echo during; sleep 2; echo job-done",
            "s1",
            background_after_s=0.5,
        )
        assert (job["job"]["id"], job["stdout"]) == ("1", "started\n")
        other = _sandbox_of(daemons, "s2")
        waiting = daemons.in_background(f"sleep {marker}", "s2")
        assert wait_for(lambda: processes_matching(f"sleep {marker}"))
        daemons.kill()
        # The command whose caller was the killed daemon's: its answer went with it, and its
        # supervisor stops it; the sandboxes and the job go on.
        assert wait_for(lambda: waiting, 30)
        assert isinstance(waiting[0], httpx.TransportError), waiting
        assert wait_for(lambda: not processes_matching(f"sleep {marker}"), 30)
        assert sorted(c.name for c in daemons.kept()) == sorted([kept, other])
        time.sleep(3)  # the job prints "during" while no daemon is there
        daemons.start()
        ended = _job(daemons, "1", wait_s=30)
        assert (ended["status"], ended["result"]["exit_code"]) == ("completed", 0), (
            ended,
            daemons.current.output(),
        )
        assert ended["result"]["stdout"] == "during\njob-done\n"
        again = daemons.ok("cat /tmp/kept ~/home", "s1")
        assert (again["stdout"], again["sandbox"]) == ("kept\nhome\n", kept)
        assert daemons.ok("echo back", "s2")["sandbox"] == other
        with daemons.client() as http:
            listed = {s["id"] for s in http.get("/v1/sessions").json()["sessions"]}
        assert listed == {"s1", "s2"}
        later = daemons.ok("sleep 2", "s1", background_after_s=0.3)
        assert later["job"]["id"] == "2", "a job id is never given twice"
        # The new daemon's audit lines name the sandboxes it took over.
        lines = [json.loads(line) for line in daemons.current.audit_log.read_text().splitlines()]
        assert any(
            line.get("session") == "s1" and line.get("sandbox") == kept and line["status"] == 200
            for line in lines[-4:]
        ), lines[-4:]


def test_a_stop_keeps_the_sandboxes_and_remove_sandboxes_removes_them(
    docker_client: Any,
) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        kept = daemons.ok("echo kept > /tmp/kept", "s1")["sandbox"]
        daemons.ok("sleep 300", "s1", background_after_s=0.3)
        stopped = _sandboxd("stop", "--socket", str(daemons.socket))
        assert stopped.returncode == 0, stopped.stderr
        assert "keep running" in stopped.stdout
        assert daemons.current is not None and daemons.current.proc.poll() == 0
        assert not daemons.socket.exists()
        assert [c.name for c in daemons.kept()] == [kept]
        daemons.start()
        assert daemons.ok("cat /tmp/kept", "s1")["stdout"] == "kept\n"
        assert _job(daemons, "1")["status"] == "running"
        removed = _sandboxd("stop", "--remove-sandboxes", "--socket", str(daemons.socket))
        assert removed.returncode == 0, removed.stderr
        assert "removed its sandboxes" in removed.stdout
        assert daemons.kept() == [] and kept_volumes(docker_client, daemons.state_dir) == []
        none = _sandboxd("stop", "--socket", str(daemons.socket))
        assert none.returncode == 1 and "no sandboxd is running" in none.stderr
        daemons.start()
        assert "--remove-sandboxes" in _lost(daemons.run("cat /tmp/kept", "s1"))
        job = _job(daemons, "1")
        assert job["status"] == "killed" and "--remove-sandboxes" in job["result"]["error"]
        fresh = daemons.run("cat /tmp/kept", "s1", if_lost="fresh")
        assert fresh.status_code == 200, fresh.text
        body = fresh.json()
        assert body["exit_code"] == 1 and "No such file" in body["stderr"]
        assert "--remove-sandboxes" in body["notice"] and "fresh, empty" in body["notice"]
        assert daemons.ok("true", "s1")["sandbox"] == body["sandbox"]


def test_sandboxes_removed_or_stopped_while_no_daemon_ran_are_answered_with_why(
    docker_client: Any,
) -> None:
    """What an engine restart (or a host reboot) leaves: containers stopped, or gone."""
    with restartable(docker_client) as daemons:
        daemons.start()
        removed = daemons.ok("echo x > /tmp/x", "removed")["sandbox"]
        stopped = daemons.ok("echo x > /tmp/x", "stopped")["sandbox"]
        kept = daemons.ok("echo x > /tmp/x", "kept")["sandbox"]
        daemons.ok("sleep 300", "stopped", background_after_s=0.3)
        daemons.kill()
        docker_client.containers.get(removed).remove(force=True)
        docker_client.containers.get(stopped).kill()
        # WHY wait: the engine answers a kill once it sent the signal, not once it stopped.
        docker_client.containers.get(stopped).wait(timeout=30)
        daemons.start()
        assert "was removed while no daemon ran" in _lost(daemons.run("true", "removed"))
        why = _lost(daemons.run("true", "stopped"))
        assert "stopped while no daemon ran (exit status 137)" in why
        assert "the engine restarted" in why and "lost its sandbox" in why
        assert daemons.ok("cat /tmp/x", "kept")["stdout"] == "x\n"
        job = _job(daemons, "1")
        assert job["status"] == "killed" and "ended with its sandbox" in job["result"]["error"]
        # Nothing leaked: the stopped container and every volume of the two are gone.
        assert [c.name for c in daemons.kept()] == [kept]
        assert all(
            name.startswith(f"{kept}.") for name in kept_volumes(docker_client, daemons.state_dir)
        )
        fresh = daemons.run("true", "removed", if_lost="fresh")
        assert fresh.status_code == 200 and "removed" in fresh.json()["notice"]


def test_a_restarted_daemon_holds_what_it_takes_over_to_its_policy(docker_client: Any) -> None:
    work = short_dir("rw")
    paths = {name: work / name for name in ("moved", "denied", "fine")}
    for path in paths.values():
        path.mkdir()
    with restartable(docker_client, f'allowed_roots = ["{work}"]\n') as daemons:
        daemons.start()
        for name, path in paths.items():
            daemons.ok("true", name, allowed_paths=[{"path": str(path)}])
        daemons.kill()
        paths["moved"].rename(work / "moved.old")
        paths["moved"].mkdir()  # the same name, another directory
        daemons.start(f'allowed_roots = ["{work}"]\nextra_denies = ["{paths["denied"]}"]\n')
        allowed = [{"path": str(paths["moved"])}]
        why = _lost(daemons.run("true", "moved", allowed_paths=allowed))
        assert "no longer allows it" in why and "no longer what it was" in why, why
        # Asked with its own path, a request is refused by the policy itself (403); with any
        # other, the session says what became of its sandbox.
        denied = [{"path": str(paths["denied"])}]
        assert daemons.run("true", "denied", allowed_paths=denied).status_code == 403
        why = _lost(daemons.run("true", "denied", allowed_paths=[{"path": str(paths["fine"])}]))
        assert "no longer allows it" in why and str(paths["denied"]) in why, why
        fine = daemons.ok("pwd", "fine", allowed_paths=[{"path": str(paths["fine"])}])
        assert fine["stdout"] == f"{paths['fine']}\n"
        assert len(daemons.kept()) == 1


def test_a_sandbox_nobody_comes_back_for_ends_itself(docker_client: Any, marker: str) -> None:
    with restartable(docker_client, "orphan_ttl_s = 2\n") as daemons:
        daemons.start()
        (box,) = [daemons.ok("true", "s1")["sandbox"]]
        daemons.ok(f"sleep {marker}", "s1", background_after_s=0.3)
        daemons.kill()
        container = docker_client.containers.get(box)
        assert wait_for(lambda: (container.reload(), container.status)[1] == "exited", 30)
        assert not processes_matching(f"sleep {marker}")
        daemons.start()
        why = _lost(daemons.run("true", "s1"))
        assert "ended itself after waiting for a daemon" in why and "2 s" in why, why
        assert daemons.kept() == [] and kept_volumes(docker_client, daemons.state_dir) == []


def test_a_fork_cut_short_by_a_kill_leaves_no_fork_and_its_source_thawed(
    docker_client: Any,
) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        source = daemons.ok("head -c 200000000 /dev/zero > /tmp/big", "source")["sandbox"]
        container = docker_client.containers.get(source)
        answers: list[httpx.Response | Exception] = []

        def fork() -> None:
            transport = httpx.HTTPTransport(uds=os.fspath(daemons.socket))
            with httpx.Client(transport=transport, base_url="http://x", timeout=120) as http:
                try:
                    answers.append(http.post("/v1/sessions/source/fork", json={"into": ["f1"]}))
                except httpx.TransportError as exc:
                    answers.append(exc)

        threading.Thread(target=fork, daemon=True).start()
        paused = wait_for(lambda: (container.reload(), container.status)[1] == "paused", 60)
        assert paused, answers
        daemons.kill()
        assert wait_for(lambda: answers, 30) and isinstance(answers[0], httpx.TransportError)
        daemons.start()
        container.reload()
        assert container.status == "running"
        assert daemons.ok("stat -c %s /tmp/big", "source")["stdout"] == "200000000\n"
        # The fork was never answered: its sandbox and its copier are gone, and the session
        # it would have been is a new one.
        assert [c.name for c in daemons.kept()] == [source]
        fresh = daemons.ok("ls /tmp", "f1")
        assert fresh["stdout"] == "" and fresh["sandbox"] != source


def test_the_warm_pool_is_taken_over_or_removed_never_leaked(docker_client: Any) -> None:
    pool = "[pool]\nsize = 2\n"
    with restartable(docker_client, pool) as daemons:
        daemons.start()
        for session in ("a", "b"):  # a spec asked for twice is kept warm
            daemons.ok("true", session)

        def warm() -> int:
            with daemons.client() as http:
                return int(http.get("/v1/health").json()["warm"])

        assert wait_for(lambda: warm() == 2, 60)
        daemons.kill()
        daemons.start()
        assert warm() == 2 and len(daemons.kept()) == 4
        with daemons.client() as http:
            started = http.post("/v1/sessions/c/start", json={}).json()
        assert started["state"] == "started" and started["steps"] == {}, started  # a warm one
        daemons.kill()
        daemons.start("[pool]\nsize = 0\n")  # no room for warm ones any more: removed
        assert warm() == 0 and len(daemons.kept()) == 3
        # The warm one handed to c is c's (its label still says where it started).
        assert daemons.ok("true", "c")["sandbox"] == started["sandbox"]
        with daemons.client() as http:
            listed = {s["id"] for s in http.get("/v1/sessions").json()["sessions"]}
        assert listed == {"a", "b", "c"}


def test_the_session_caps_count_the_sandboxes_taken_over(docker_client: Any) -> None:
    with restartable(docker_client, "max_sessions = 2\nmax_sessions_per_caller = 2\n") as daemons:
        daemons.start()
        first = _sandbox_of(daemons, "a")
        _sandbox_of(daemons, "b")
        daemons.kill()
        daemons.start()
        over = daemons.run("true", "c")
        assert over.status_code == 429, over.text
        assert over.json()["error"]["code"] == "too_many_sessions"
        with daemons.client() as http:
            assert http.get("/v1/health").json()["containers"] == 2
            assert http.delete("/v1/sessions/a").status_code == 200
        assert daemons.ok("true", "c")["sandbox"] != first
        assert len(daemons.kept()) == 2


def test_a_second_daemon_on_the_same_state_directory_is_refused(docker_client: Any) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        other = start_daemon(short_dir(), f'state_dir = "{daemons.state_dir}"\n', wait=False)
        assert other.proc.wait(60) == 1
        assert "another sandboxd uses the state directory" in other.output()
        assert f"(pid {daemons.current.proc.pid})" in other.output()


class _Web(LocalHTTPServer):
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = b"hello again\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])


def test_a_kept_sandbox_s_egress_is_served_again(docker_client: Any) -> None:
    config = 'allow_private_hosts = true\n[egress_hosts]\n"web.test" = ["127.0.0.1"]\n'
    with _Web() as web, restartable(docker_client, config) as daemons:
        hosts = [f"web.test:{web.port}", f"127.0.0.1:{web.port}"]  # a loopback address on purpose
        curl = f"curl -sS --noproxy '' --max-time 20 http://web.test:{web.port}/"
        daemons.start()
        before = daemons.ok(curl, "egress", allowed_hosts=hosts)
        assert before["stdout"] == "hello again\n"
        daemons.kill()
        daemons.start()
        after = daemons.ok(curl, "egress", allowed_hosts=hosts)
        assert (after["stdout"], after["sandbox"]) == ("hello again\n", before["sandbox"])


def test_a_sandbox_without_python_is_kept_and_ends_without_its_daemon(
    docker_client: Any, busybox_image: str
) -> None:
    config = f'allowed_images = ["{busybox_image}"]\norphan_ttl_s = 10\n'
    with restartable(docker_client, config) as daemons:
        daemons.start()
        box = daemons.ok("echo kept > /tmp/kept", "exec", image=busybox_image)["sandbox"]
        daemons.kill()
        daemons.start()
        again = daemons.ok("cat /tmp/kept", "exec", image=busybox_image)
        assert (again["stdout"], again["sandbox"]) == ("kept\n", box)
        daemons.kill()  # no daemon beats for it any more: it ends itself
        container = docker_client.containers.get(box)
        assert wait_for(lambda: (container.reload(), container.status)[1] == "exited", 60)
