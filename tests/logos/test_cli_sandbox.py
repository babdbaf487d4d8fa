"""The command with a real sandboxd daemon (subprocess, real socket, real Docker), and the
checks that must fail before the model is called when the daemon is missing."""

from __future__ import annotations

import json
import random
import signal
import time

import pytest

from tests.support.cli_harness import Home, doctor, logos, openai_env, running_logos, sent_messages
from tests.support.processes import interrupt, processes_matching
from tests.support.sandboxd_harness import Daemon
from tests.support.sse_server import ScriptedServer, json_error, openai_stream


@pytest.mark.docker
def test_a_task_runs_its_commands_in_the_sandbox(
    daemon: Daemon, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream(
            "<cmd>echo made-in-sandbox > proof.txt && cat /etc/os-release | head -1</cmd>"
        ),
        openai_stream("Written."),
    )
    done = logos(
        ["--model", "m", "--sandbox", "--socket", str(daemon.socket), "write a file"],
        home,
        openai_env(home, sse_server),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # auto-approved: no --yes needed in the sandbox
    assert (home.work / "proof.txt").read_text() == "made-in-sandbox\n"
    assert "Debian" in sent_messages(sse_server, 1)[-1]["content"]
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert "Docker sandbox" in system and f"{home.work} (read-write)" in system
    assert "Network access is off" in system
    assert home.run_records()[0]["runner"] == "sandbox"
    assert [(a["action"], a["runner"]) for a in home.audit()] == [("auto", "sandbox")]
    with daemon.client() as http:  # the run's session was closed at the end
        assert http.get("/v1/sessions").json()["sessions"] == []
    # The sandbox was started as the run began (while the model wrote), not by the command.
    audited = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    (command,) = [line for line in audited if line["command"] and "proof.txt" in line["command"]]
    (start,) = [line for line in audited if line["session"] == command["session"]][:1]
    assert start["path"] == f"/v1/sessions/{command['session']}/start" and start["start_steps"]
    assert command["start_steps"] is None


@pytest.mark.docker
def test_exec_in_the_sandbox_sees_only_allowed_paths(daemon: Daemon, home: Home) -> None:
    (home.work / "visible.txt").write_text("hello\n")
    message = f"<cmd>cat visible.txt</cmd><cmd>ls {home.root / 'state'}</cmd><cmd>touch x</cmd>"
    done = logos(
        ["exec", "--sandbox", "--socket", str(daemon.socket), "--allow", str(home.work)],
        home,
        home.env(),
        stdin=message,
        timeout=120,
    )
    assert done.returncode == 1  # ls and touch fail: not mounted, and read-only
    assert "<stdout>\nhello\n</stdout>" in done.stdout
    assert "No such file or directory" in done.stdout and "Read-only file system" in done.stdout


@pytest.mark.docker
def test_doctor_checks_the_provider_the_sandbox_and_the_runner(
    daemon: Daemon, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("o", finish="length"))
    done = logos(
        ["doctor", "--model", "m", "--sandbox", "--socket", str(daemon.socket)],
        home,
        openai_env(home, sse_server),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["ok", "config"],
        ["ok", "model"],
        ["ok", "provider"],
        ["ok", "sandboxd"],
        ["ok", "runner"],
    ]
    assert sse_server.requests[0].json["max_tokens"] == 1


def test_a_missing_daemon_is_reported_before_the_model_is_called(
    home: Home, sse_server: ScriptedServer
) -> None:
    socket = home.root / "no-daemon.sock"
    done = logos(
        ["--model", "m", "--sandbox", "--socket", str(socket), "go"],
        home,
        openai_env(home, sse_server),
    )
    assert done.returncode == 2
    assert f"sandboxd is not running on {socket}" in done.stderr
    assert f"start it with `sandboxd serve --socket {socket}`" in done.stderr
    assert "pass --socket PATH (or set $SANDBOXD_SOCKET)" in done.stderr
    assert sse_server.requests == [] and home.runs() == []


def test_doctor_says_what_failed_and_how_to_fix_it(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(json_error(401, "bad key", type="authentication_error"))
    socket = home.root / "no-daemon.sock"
    done, checks = doctor(["--model", "m", "--sandbox", "--socket", str(socket)], home, sse_server)
    assert done.returncode == 1
    assert checks == dict(config="ok", model="ok", provider="FAIL", sandboxd="FAIL", runner="skip")
    assert "OPENAI_API_KEY" in done.stdout and "`sandboxd serve --socket" in done.stdout


def test_doctor_without_a_provider_names_the_default_model_and_the_variables_that_override_it(
    home: Home,
) -> None:
    done = logos(["doctor"], home, home.env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok    model     the default local model" in done.stdout
    assert "ANTHROPIC_API_KEY" in done.stdout and "--gguf" in done.stdout
    assert "skip  provider" in done.stdout and "not downloaded yet" in done.stdout
    assert "ok    runner" in done.stdout


@pytest.mark.docker
def test_ctrl_c_mid_command_in_the_sandbox_leaves_nothing_running(
    daemon: Daemon, home: Home, sse_server: ScriptedServer
) -> None:
    marker = f"sleep {random.randint(100_000, 999_999)}.{random.randint(100_000, 999_999)}"
    sse_server.enqueue(openai_stream(f"Waiting.\n<cmd>{marker}</cmd>"))
    args = ["--model", "m", "--sandbox", "--socket", str(daemon.socket), "wait in the sandbox"]
    with running_logos(args, home, openai_env(home, sse_server)) as proc:
        deadline = time.monotonic() + 60
        while not processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_matching(marker), "the command never started in the sandbox"
        _, stderr = interrupt(proc, signal.SIGINT, timeout=60)
        assert proc.returncode == 130, stderr
    deadline = time.monotonic() + 20
    while processes_matching(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_matching(marker) == []
    with daemon.client() as http:
        assert http.get("/v1/sessions").json()["sessions"] == []
    records = home.run_records()
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"
    assert marker in next(r for r in records if r["type"] == "step")["content"]
