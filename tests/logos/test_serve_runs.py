"""`logos serve` end to end: a real uvicorn on a free port, real SSE clients (httpx), the
scripted model server speaking the OpenAI wire format, and real local bash."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from logos.serve.server import GRACEFUL_S
from tests.support.cli_harness import Home, read_jsonl, sent_messages
from tests.support.processes import processes_matching
from tests.support.serve_harness import (
    AUTO_LOCAL,
    JOB_AFTER_HALF_A_SECOND,
    Served,
    read_events,
    script_a_build_that_goes_on_as_a_job,
    serving,
)
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def served(home: Home, sse_server: ScriptedServer) -> Iterator[Served]:
    with serving(home, sse_server, config=AUTO_LOCAL) as server:
        yield server


def test_a_run_finishes_and_is_saved_with_no_client_attached(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Looking.\n<cmd>echo saved-output</cmd>\n", event_pause_s=0.02),
        openai_stream("It printed saved-output.", event_pause_s=0.02),
    )
    with served.client() as client:
        started = served.start_run(client, prompt="print something", approval="auto")
    # Nobody watches: the run goes on in the server's task group.
    watcher = served.client()
    status = served.wait_finished(watcher, started["run"])
    assert status["stop_reason"] == "final"
    assert status["response"] == "It printed saved-output."
    assert status["turns"] == 2

    session_dir = served.home.state / "serve" / "sessions" / started["session"]
    records = read_jsonl(session_dir / "session.jsonl")
    kinds = [r["type"] for r in records]
    assert kinds == ["run", "prompt", "approval", "step", "step", "step", "done"]
    assert records[4]["results"][0]["stdout"] == "saved-output\n"
    events = read_events(watcher, started["run"])
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "start" and events[-1].type == "done"
    audit = read_jsonl(served.home.state / "audit.jsonl")
    assert audit[-1]["command"] == "echo saved-output" and audit[-1]["action"] == "auto"


def test_a_client_that_reconnects_with_last_event_id_gets_every_event_once(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("one two three four five six seven", chunk_size=3, event_pause_s=0.05),
    )
    client = served.client()
    started = served.start_run(client, prompt="count", approval="never-run")
    first = read_events(client, started["run"], stop_after=4)  # then hang up mid-run
    status = client.get(f"/v1/runs/{started['run']}").json()
    assert status["status"] == "running", "the run must still be going when the client leaves"
    rest = read_events(client, started["run"], last_event_id=first[-1].id)
    ids = [e.id for e in first + rest]
    assert ids == list(range(1, len(ids) + 1))
    assert rest[-1].type == "done"
    deltas = "".join(e.data["text"] for e in first + rest if e.type == "delta")
    assert deltas == "one two three four five six seven"
    # After the run, the same replay comes from its saved record.
    again = read_events(client, started["run"], last_event_id=first[-1].id)
    assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in rest]


def test_an_idle_stream_gets_keep_alive_comments(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("slow", chunk_size=1, event_pause_s=0.4))
    with serving(home, sse_server, config=AUTO_LOCAL + "keepalive_s = 0.1\n") as served:
        client = served.client()
        started = served.start_run(client, prompt="hi", approval="never-run")
        comments: list[str] = []
        events = read_events(client, started["run"], comments=comments)
    assert ": keep-alive" in comments
    assert events[-1].type == "done"


def test_two_subscribers_see_the_same_events(served: Served, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("a reply in several pieces", event_pause_s=0.05))
    client = served.client()
    started = served.start_run(client, prompt="hi", approval="never-run")
    other = served.client()
    with (
        client.stream("GET", f"/v1/runs/{started['run']}/events") as one,
        other.stream("GET", f"/v1/runs/{started['run']}/events") as two,
    ):
        first, second = one.read(), two.read()
    assert first == second
    assert b"event: done" in first


def test_the_runs_stream_says_when_a_run_starts_publishes_and_ends(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("a short reply", event_pause_s=0.05))
    client = served.client()
    versions: list[int] = []
    with client.stream("GET", "/v1/runs/changes") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        started: dict[str, Any] | None = None
        for line in lines:
            if line.startswith("data:"):
                versions.append(json.loads(line[len("data:") :])["version"])
                if started is None:
                    started = served.start_run(client, prompt="hi", approval="never-run")
                elif client.get(f"/v1/runs/{started['run']}").json()["status"] == "finished":
                    break
    assert versions == sorted(set(versions)) and len(versions) >= 2, versions
    assert started is not None
    listed = {run["id"]: run for run in client.get("/v1/runs").json()["runs"]}
    assert listed[started["run"]]["status"] == "finished"


def test_the_runs_stream_needs_the_token(served: Served) -> None:
    response = served.client(token="wrong").get("/v1/runs/changes")
    assert response.status_code == 401


def test_a_slow_subscriber_is_dropped_and_catches_up_without_slowing_the_run(
    home: Home, sse_server: ScriptedServer
) -> None:
    text = "x" * 4000
    sse_server.enqueue(openai_stream(text * 400, chunk_size=4000))  # 400 deltas of 4 KB
    config = AUTO_LOCAL + "subscriber_buffer = 16\n"
    with serving(home, sse_server, config=config) as served:
        client = served.client()
        started = served.start_run(client, prompt="talk", approval="never-run")
        slow = _slow_subscriber(served, started["run"])
        try:
            status = served.wait_finished(client, started["run"], timeout=30)
            assert status["stop_reason"] == "final"
            received = _drain(slow)
        finally:
            slow.close()
        assert b"was dropped; reconnect with Last-Event-ID" in received
        seen = [int(line[4:]) for line in received.split(b"\n") if line.startswith(b"id: ")]
        assert seen == list(range(1, len(seen) + 1))
        rest = read_events(client, started["run"], last_event_id=seen[-1])
        assert [e.id for e in rest] == list(range(seen[-1] + 1, status["events"] + 1))
        assert len(seen) < status["events"]


def test_cancel_kills_the_commands_and_keeps_what_was_done(
    served: Served, sse_server: ScriptedServer
) -> None:
    marker = _sleep_marker()
    sse_server.enqueue(openai_stream(f"Waiting.\n<cmd>{marker}</cmd>\n"))
    client = served.client()
    started = served.start_run(client, prompt="wait", approval="auto")
    _wait_for(lambda: processes_matching(marker), "the command to start")
    answer = client.post(f"/v1/runs/{started['run']}/cancel")
    assert answer.status_code == 202
    status = served.wait_finished(client, started["run"], timeout=20)
    assert status["stop_reason"] == "canceled"
    _wait_for(lambda: not processes_matching(marker), "the command to be killed")
    records = read_jsonl(
        served.home.state / "serve" / "sessions" / started["session"] / "session.jsonl"
    )
    kept = [r for r in records if r["type"] == "step"]
    assert kept[0]["content"].startswith("Waiting.")
    assert "not finished: the run was canceled" in kept[1]["results"][0]["error"]
    assert client.post(f"/v1/runs/{started['run']}/cancel").status_code == 409


def test_an_approval_nobody_answers_expires_and_the_model_reads_why(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>touch approved-file</cmd>"), openai_stream("Fine."))
    with serving(home, sse_server, config=AUTO_LOCAL + "approval_ttl_s = 0.5\n") as served:
        client = served.client()
        started = served.start_run(client, prompt="make a file", approval="confirm")
        events = read_events(client, started["run"])
        asked = next(e for e in events if e.type == "confirm_required")
        assert asked.data["command"] == "touch approved-file"
        decided = next(e for e in events if e.type == "approval")
        assert (decided.data["action"], decided.data["reason"]) == ("no", "expired")
        assert client.get("/v1/approvals").json() == {"approvals": []}
        late = client.post(f"/v1/approvals/{asked.data['id']}", json={"approve": True})
        assert late.status_code == 409
        assert late.json()["error"] == (
            "nobody answered within 0.5 s, so this command was denied as expired and the model "
            "was told"
        )
    assert not (home.work / "approved-file").exists()
    result = sent_messages(sse_server, 1)[-1]["content"]
    assert "the user declined to run this command: expired" in result


def test_a_denial_reason_reaches_the_model_while_other_blocks_run(
    home: Home, sse_server: ScriptedServer
) -> None:
    rules = home.root / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "echo"\nverdict = "auto"\nprogram = "echo"\nmatch = ["echo hi"]\n'
    )
    sse_server.enqueue(
        openai_stream("<cmd>git push --force</cmd>\n<cmd>echo other-block</cmd>"),
        openai_stream("Understood."),
    )
    config = f'approval_rules = "{rules}"\n' + AUTO_LOCAL
    with serving(home, sse_server, config=config) as served:
        client = served.client()
        started = served.start_run(client, prompt="push", approval="confirm")
        seen: list[str] = []
        with client.stream("GET", f"/v1/runs/{started['run']}/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    seen.append(line[7:])
                if line.startswith("data: ") and '"command_result"' in line:
                    break  # the other block finished while the first one waits
        assert "confirm_required" in seen
        pending = client.get("/v1/approvals").json()["approvals"]
        assert [p["command"] for p in pending] == ["git push --force"]
        assert pending[0]["run"] == started["run"]
        answer = client.post(
            f"/v1/approvals/{pending[0]['id']}",
            json={"approve": False, "reason": "push to the staging branch instead"},
        )
        assert answer.status_code == 200
        status = served.wait_finished(client, started["run"])
        assert status["stop_reason"] == "final"
    result = sent_messages(sse_server, 1)[-1]["content"]
    assert "declined to run this command: push to the staging branch instead" in result
    assert "other-block" in result
    audit = read_jsonl(home.state / "audit.jsonl")
    assert [(a["action"], a["command"]) for a in audit] == [
        ("auto", "echo other-block"),
        ("no", "git push --force"),
    ]


def test_restart_replays_a_saved_run_and_continues_its_session(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("The answer is 42."))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        client = served.client()
        first = served.start_run(client, prompt="what is the answer?", approval="never-run")
        served.wait_finished(client, first["run"])
        before = read_events(client, first["run"])
        token = served.token
    sse_server.enqueue(openai_stream("Still 42."))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        assert served.token == token, "the token is kept across restarts"
        client = served.client()
        assert [(e.id, e.data) for e in read_events(client, first["run"])] == [
            (e.id, e.data) for e in before
        ]
        assert client.get(f"/v1/runs/{first['run']}").json()["stop_reason"] == "final"
        sessions = client.get("/v1/sessions").json()["sessions"]
        assert [(s["id"], s["title"]) for s in sessions] == [
            (first["session"], "what is the answer?")
        ]
        second = served.start_run(
            client, prompt="are you sure?", session=first["session"], approval="never-run"
        )
        assert second["session"] == first["session"]
        served.wait_finished(client, second["run"])
        session = client.get(f"/v1/sessions/{first['session']}").json()
        prompts = [e["content"] for e in session["entries"] if e["type"] == "prompt"]
        assert prompts == ["what is the answer?", "are you sure?"]
    assert [m["content"] for m in sent_messages(sse_server, 1)] == [
        "what is the answer?",
        "The answer is 42.",
        "are you sure?",
    ]


def test_shutdown_cancels_runs_and_saves_them(home: Home, sse_server: ScriptedServer) -> None:
    marker = _sleep_marker()
    sse_server.enqueue(openai_stream(f"<cmd>{marker}</cmd>"))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        client = served.client()
        started = served.start_run(client, prompt="wait", approval="auto")
        _wait_for(lambda: processes_matching(marker), "the command to start")
        assert served.stop() == 0
    assert not processes_matching(marker)
    records = read_jsonl(home.state / "serve" / "sessions" / started["session"] / "session.jsonl")
    assert records[-1]["type"] == "done" and records[-1]["stop_reason"] == "canceled"


def test_a_page_following_the_runs_does_not_hold_the_shutdown(
    home: Home, sse_server: ScriptedServer
) -> None:
    with serving(home, sse_server) as served:
        # WHY a client of its own: the harness closes its clients before it stops the server,
        # and this one must still be listening while the server stops.
        headers = {"authorization": f"Bearer {served.token}"}
        with (
            httpx.Client(base_url=served.url, headers=headers, timeout=30) as client,
            client.stream("GET", "/v1/runs/changes") as stream,
        ):
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            began = time.monotonic()
            assert served.stop() == 0
            stopped_s = time.monotonic() - began
            assert [line for line in lines if line] == []  # it ended with the server, nothing more
    # WHY not a time well under the grace: a machine busy enough takes seconds to stop any
    # server. uvicorn says so when it waits out its grace for a connection; it never did, and
    # the stop took less than that grace.
    assert "graceful shutdown exceeded" not in served.output(), served.output()
    assert stopped_s < GRACEFUL_S, f"the shutdown waited {stopped_s:.1f} s for the stream"


def test_a_slow_command_goes_on_as_a_job_streamed_and_saved(
    home: Home, sse_server: ScriptedServer
) -> None:
    script_a_build_that_goes_on_as_a_job(sse_server)
    with serving(home, sse_server, config=JOB_AFTER_HALF_A_SECOND) as served:
        client = served.client()
        started = served.start_run(client, prompt="build it", approval="auto")
        events = read_events(client, started["run"])
    [job_start] = [e.data for e in events if e.type == "job_start"]
    assert (job_start["turn"], job_start["index"], job_start["id"]) == (1, 0, "1")
    [job_end] = [e.data for e in events if e.type == "job_end"]
    assert job_end["seen"] is True and job_end["result"]["stdout"] == "built\n"
    assert events[-1].type == "done" and events[-1].data["stop_reason"] == "final"
    assert "`wait %1` waits for job 1" in sse_server.requests[0].json["messages"][0]["content"]
    records = read_jsonl(home.state / "serve" / "sessions" / started["session"] / "session.jsonl")
    kinds = [r["type"] for r in records]
    assert kinds.index("job_start") < kinds.index("job_end") < kinds.index("done")


def test_memory_notes_through_the_api_reach_new_runs(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("Noted."))
    client = served.client()
    saved = client.put("/v1/memory/  Build Command ", json={"text": "make -j4 test"})
    assert saved.status_code == 200 and saved.json()["key"] == "build command"
    assert client.get("/v1/memory/BUILD COMMAND").json()["text"] == "make -j4 test"
    assert [n["key"] for n in client.get("/v1/memory").json()["notes"]] == ["build command"]
    started = served.start_run(client, prompt="hello", approval="never-run")
    served.wait_finished(client, started["run"])
    assert client.delete("/v1/memory/build command").status_code == 204
    assert client.get("/v1/memory/build command").status_code == 404
    assert client.put("/v1/memory/%20", json={"text": "x"}).status_code == 400
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert "- build command: make -j4 test" in system
    stored = json.loads((served.home.state / "memory.json").read_text())
    assert stored == {"notes": []}
    assert (served.home.state / "memory.json").stat().st_mode & 0o777 == 0o600


def test_a_note_the_model_saves_is_served_and_an_approval_gates_it(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>remember deploy: make deploy ENV=staging</cmd>"),
        openai_stream("Saved."),
        openai_stream("<cmd>forget deploy</cmd>"),
        openai_stream("Not forgotten."),
    )
    with served.client() as client:
        started = served.start_run(client, prompt="learn", approval="auto")
        assert served.wait_finished(client, started["run"])["stop_reason"] == "final"
        assert client.get("/v1/memory/deploy").json()["text"] == "make deploy ENV=staging"
        refused = served.start_run(client, prompt="clean up", approval="never-run")
        assert served.wait_finished(client, refused["run"])["stop_reason"] == "final"
        assert client.get("/v1/memory/deploy").status_code == 200
    assert (
        "`recall build command` shows a note"
        in sse_server.requests[0].json["messages"][0]["content"]
    )
    audit = read_jsonl(served.home.state / "audit.jsonl")
    assert [(line["command"], line["action"]) for line in audit[-2:]] == [
        ("remember deploy: make deploy ENV=staging", "auto"),
        ("forget deploy", "never-run"),
    ]


def test_unix_socket_is_private_and_serves_the_api(home: Home, sse_server: ScriptedServer) -> None:
    path = home.root / "run" / "logos.sock"
    with serving(
        home, sse_server, ["--socket", str(path)], config=AUTO_LOCAL, wait=False
    ) as served:
        _wait_for(lambda: "serving on" in served.output(), "the server to start")
        assert path.stat().st_mode & 0o777 == 0o600
        transport = httpx.HTTPTransport(uds=str(path))
        with httpx.Client(transport=transport, base_url="http://logos") as client:
            assert client.get("/v1/sessions").status_code == 401
            answer = client.get("/v1/sessions", headers={"authorization": f"Bearer {served.token}"})
            assert answer.json() == {"sessions": []}
    assert not path.exists()


def test_a_non_loopback_address_needs_an_explicit_flag(
    home: Home, sse_server: ScriptedServer
) -> None:
    with serving(home, sse_server, ["--host", "0.0.0.0"], config=AUTO_LOCAL, wait=False) as served:
        assert served.proc.wait(30) == 2
        assert "0.0.0.0 is not a loopback address" in served.output()
        assert "--allow-remote" in served.output()
    with serving(
        home, sse_server, ["--host", "0.0.0.0", "--allow-remote"], config=AUTO_LOCAL
    ) as served:
        assert "WARNING: listening beyond this machine" in served.output()


def _slow_subscriber(served: Served, run_id: str) -> socket.socket:
    """A client that asks for the stream and then reads nothing, with a tiny receive
    buffer: the server's writes to it soon block."""
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(
        f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {served.token}\r\n\r\n".encode()
    )
    return sock


def _drain(sock: socket.socket) -> bytes:
    """Everything the server sent, until it ended the response."""
    sock.settimeout(20)
    data = bytearray()
    while not data.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return _unchunk(bytes(data.partition(b"\r\n\r\n")[2]))


def _unchunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


def _sleep_marker() -> str:
    """A command whose process is easy to find: sleep for a unique number of seconds."""
    return f"sleep 1000.{time.monotonic_ns() % 10**12:012d}"


def _wait_for(condition: object, what: str, timeout: float = 20) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
