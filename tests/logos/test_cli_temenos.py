"""`--sandbox temenos`: the command with a real daemon that speaks temenos's API (sandboxd's
temenos routes on its socket, or the TCP server of tests/support), `logos doctor` checking
it, and `--sandbox` alone still meaning sandboxd."""

from __future__ import annotations

import json
from typing import Any

import pytest

from logos.cli.arguments import with_command
from tests.support.cli_harness import Home, doctor, logos, openai_env, sent_messages
from tests.support.sandboxd_harness import Daemon, running_daemon
from tests.support.sse_server import ScriptedServer, openai_stream
from tests.support.temenos_server import temenos_server


def test_sandbox_takes_an_optional_kind_and_leaves_the_task_alone() -> None:
    assert with_command(["--sandbox", "fix the test"]) == [
        "run",
        "--sandbox=sandboxd",
        "fix the test",
    ]
    assert with_command(["--sandbox", "temenos", "go"]) == ["run", "--sandbox", "temenos", "go"]
    assert with_command(["exec", "--sandbox"]) == ["exec", "--sandbox=sandboxd"]
    assert with_command(["--", "--sandbox", "x"]) == ["run", "--", "--sandbox", "x"]


@pytest.mark.docker
def test_a_task_runs_its_commands_through_the_temenos_api(
    daemon: Daemon, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>echo via-temenos > proof.txt && cat proof.txt</cmd>"),
        openai_stream("Written."),
    )
    args = ["--model", "m", "--sandbox", "temenos", "--sandbox-addr", str(daemon.socket)]
    done = logos([*args, "write a file"], home, openai_env(home, sse_server), timeout=120)
    assert done.returncode == 0, done.stderr
    assert (home.work / "proof.txt").read_text() == "via-temenos\n"
    assert "via-temenos" in sent_messages(sse_server, 1)[-1]["content"]
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert f"temenos sandbox that sees only these host paths: {home.work} (read-write)" in system
    assert "Network access was not asked for" in system
    header = home.run_records()[0]
    assert (header["runner"], header["sandbox"]) == ("sandbox", "temenos")

    # Resumed, the run stays with temenos (here, at an address where none answers).
    gone = home.root / "gone.sock"
    resumed = logos(
        ["resume", str(home.only_run()), "--sandbox-addr", str(gone)],
        home,
        openai_env(home, sse_server),
    )
    assert resumed.returncode == 2 and f"cannot reach a temenos daemon at {gone}" in resumed.stderr


@pytest.mark.docker
def test_doctor_checks_temenos_health_and_a_round_trip(
    daemon: Daemon, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("o", finish="length"))
    args = ["doctor", "--model", "m", "--sandbox", "temenos", "--sandbox-addr", str(daemon.socket)]
    done = logos(args, home, openai_env(home, sse_server), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split(maxsplit=2) for line in done.stdout.splitlines()]
    assert [line[:2] for line in lines] == [
        ["ok", "config"],
        ["ok", "model"],
        ["ok", "provider"],
        ["ok", "temenos"],
        ["ok", "runner"],
    ]
    assert lines[3][2] == f"healthy at {daemon.socket}"
    assert lines[4][2].startswith("ran `true` in the temenos sandbox in ")


def test_doctor_says_why_temenos_cannot_be_reached(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("o", finish="length"), openai_stream("o", finish="length"))
    with temenos_server() as server:
        address = server.address
    args = ["--model", "m", "--sandbox", "temenos", "--sandbox-addr"]
    done, checks = doctor([*args, address], home, sse_server)
    assert done.returncode == 1
    assert checks == dict(config="ok", model="ok", provider="ok", temenos="FAIL", runner="skip")
    assert f"cannot reach a temenos daemon at http://{address}" in done.stdout

    https, _ = doctor([*args, "https://h:1"], home, sse_server)
    assert https.returncode == 1 and "temenos serves plain HTTP only" in https.stdout


def test_the_environment_names_the_daemon_and_a_task_runs_over_tcp(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>echo over tcp</cmd>"), openai_stream("Done."))
    with temenos_server() as server:
        done = logos(
            ["--model", "m", "--sandbox", "temenos", "go"],
            home,
            openai_env(home, sse_server, TEMENOS_LISTEN_ADDR=server.address),
        )
        sent = server.run_bodies()
    assert done.returncode == 0, done.stderr
    assert [body["command"] for body in sent] == ["echo over tcp"]
    assert sent[-1]["allowed_paths"] == [{"path": str(home.work), "read_only": False}]
    assert sent[-1]["network"] is False and sent[-1]["timeout"] == 120
    assert "over tcp" in sent_messages(sse_server, 1)[-1]["content"]


@pytest.mark.docker
@pytest.mark.timeout(180)
def test_a_slow_command_is_a_job_the_model_waits_for(
    docker_client: Any, home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Building.\n<cmd>echo started; sleep 4; echo built</cmd>"),
        openai_stream("Waiting.\n<cmd>wait %1</cmd>"),
        openai_stream("It built."),
    )
    with running_daemon(docker_client, "temenos_background_after_s = 1\n") as daemon:
        args = ["--model", "m", "--sandbox", "temenos", "--sandbox-addr", str(daemon.socket)]
        done = logos(
            [*args, "--background-after", "1", "--json", "build it"],
            home,
            openai_env(home, sse_server),
            timeout=150,
        )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [started] = [event for event in events if event["type"] == "job_start"]
    [ended] = [event for event in events if event["type"] == "job_end"]
    assert (started["id"], ended["id"], ended["seen"]) == ("1", "1", True)
    # As temenos, sandboxd shows a running job no output: its end shows all of it.
    assert (ended["result"]["stdout"], ended["result"]["exit_code"]) == ("started\nbuilt\n", 0)
    first = sent_messages(sse_server, 1)[-1]["content"]
    assert "goes on as job 1" in first
    assert '<job id="1">' in sent_messages(sse_server, 2)[-1]["content"]
