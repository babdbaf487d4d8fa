"""Projects on `logos serve` end to end: a real uvicorn, real SSE clients, the scripted
model server speaking the OpenAI wire format (one queue: the agents of a project answer one
at a time, so replies are taken in the order the agents speak), and real local bash."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.support.cli_harness import Home, read_jsonl
from tests.support.project_harness import ProjectClient, notes, of_type, replies
from tests.support.serve_harness import AUTO_LOCAL, Served, read_stream, serving
from tests.support.sse_server import ScriptedServer, json_error, openai_stream

pytestmark = pytest.mark.timeout(120)
USAGE = {"prompt_tokens": 100, "completion_tokens": 20}


def said(text: str, **options: object) -> object:
    return openai_stream(text, usage=USAGE, **options)  # type: ignore[arg-type]


@pytest.fixture
def served(home: Home, sse_server: ScriptedServer) -> Iterator[Served]:
    with serving(home, sse_server, config=AUTO_LOCAL) as server:
        yield server


def team(served: Served, **project: object) -> ProjectClient:
    project_client = ProjectClient.create(served.client(), goal="greet the world", **project)
    project_client.add("boss", "captain", approval="auto")
    project_client.add("worker", approval="auto")
    return project_client


def sent(model: ScriptedServer, index: int) -> str:
    """The last user message of the model request `index`."""
    messages = model.requests[index].json["messages"]
    return str([m for m in messages if m["role"] == "user"][-1]["content"])


def test_a_handoff_goes_to_the_named_agent_within_the_same_turn(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("Looking first.\n<cmd>echo boss-output-not-for-others</cmd>"),
        said("Found it.\n@worker please write hello.txt"),
        said("<cmd>echo hi > hello.txt</cmd>"),
        said("Wrote hello.txt."),
    )
    project = team(served)
    events = project.ask("make a greeting file")

    routes = of_type(events, "routing")
    assert [(r["agent"], r["reason"]) for r in routes] == [
        ("boss", "captain by default"),
        ("worker", "@worker named by boss: please write hello.txt"),
    ]
    assert replies(events) == [
        ("boss", "complete", "Found it.\n@worker please write hello.txt"),
        ("worker", "complete", "Wrote hello.txt."),
    ]
    assert events[-1].data["state"] == "answered"
    assert (served.home.work / "hello.txt").read_text() == "hi\n"
    # The worker is briefed, sent what happened since its last turn, and only a summary of
    # the captain's commands.
    to_worker = sent(sse_server, 2)
    assert 'You are worker, a talon (a worker) of the project "demo"' in to_worker
    assert "[user] make a greeting file" in to_worker
    assert "[boss] Found it.\n@worker please write hello.txt" in to_worker
    assert "(boss ran: `echo boss-output-not-for-others` → exit 0)" in to_worker
    assert "boss-output-not-for-others\n" not in to_worker.replace(
        "`echo boss-output-not-for-others`", ""
    )
    assert "It is your turn: @worker named by boss: please write hello.txt." in to_worker
    briefings = [e for e in of_type(events, "message") if e["kind"] == "briefing"]
    assert [b["to"] for b in briefings] == ["boss", "worker"]
    # One numbered sequence, deltas and commands folded into their message's id.
    everything = read_stream(project.client, f"{project.path}/events", stop_after=events[-1].id)
    assert [e.id for e in everything] == list(range(1, len(everything) + 1))
    worker_reply = of_type(events, "message_start")[1]["id"]
    commands = [e for e in of_type(events, "command") if e["message"] == worker_reply]
    assert commands[0]["event"]["command"] == "echo hi > hello.txt"
    # The spend is shown live, as each model turn ends, then for good as each call ends.
    budgets = of_type(events, "budget")
    assert [(b["live"], b["agent"], b["project"]["tokens"]) for b in budgets] == [
        (True, "boss", 120),
        (True, "boss", 240),
        (False, "boss", 240),
        (True, "worker", 360),
        (True, "worker", 480),
        (False, "worker", 480),
    ]
    status = project.status()
    assert status["spent"]["tokens"] == 4 * 120
    assert {a["name"]: a["spent"]["tokens"] for a in status["agents"]} == {
        "boss": 240,
        "worker": 240,
    }


def test_an_agent_that_asks_claims_the_next_message(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("Which port should it listen on? [listening]"),
        said("Port 8080 it is."),
        said("Hello from the captain."),
    )
    project = team(served)
    first = project.ask("@worker set up the server")
    assert of_type(first, "routing")[0]["reason"] == "@worker named by the user"
    assert replies(first) == [("worker", "complete", "Which port should it listen on?")]
    assert project.status()["listening"] == "worker"
    second = project.ask("8080")
    assert of_type(second, "routing")[0] == {
        "type": "routing",
        "message": of_type(second, "message")[0]["id"],
        "agent": "worker",
        "reason": "worker asked a question and claimed the next message",
    }
    project.send("and now?")  # the claim was for one message
    third = project.turn()
    assert of_type(third, "routing")[0]["reason"] == "captain by default"


def test_a_repeated_handoff_asks_the_person_and_continues_when_told(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("@worker check the tests"),
        said("@boss they pass"),
        said("@worker check the tests once more"),
        said("Checked again: they pass."),
    )
    project = team(served)
    events = project.ask("are the tests fine?")
    assert events[-1].data["state"] == "held"
    guard = of_type(events, "guard")[0]
    assert guard["reason"] == "boss → worker again: the same handoff twice in one turn"
    assert guard["options"] == ["continue", "stop", "pick"]
    assert len(sse_server.requests) == 3, "the held handoff spends nothing more"
    assert project.status()["held"]["target"] == "worker"
    assert (
        project.client.post(
            f"{project.path}/guard", json={"action": "pick", "agent": "ghost"}
        ).status_code
        == 422
    )
    answered = project.client.post(f"{project.path}/guard", json={"action": "continue"})
    assert answered.status_code == 200, answered.text
    resumed = project.turn()
    assert replies(resumed) == [("worker", "complete", "Checked again: they pass.")]
    assert of_type(resumed, "routing")[0]["reason"] == "the person let boss's handoff go on"


def test_an_identical_reply_trips_the_guard(served: Served, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        said("@worker your turn"),
        said("@boss your turn"),
        said("@worker your turn"),
        said("@boss your turn"),
        said("Picked, so I answer."),
    )
    project = team(served)
    events = project.ask("talk")
    assert events[-1].data["state"] == "held"
    assert of_type(events, "guard")[0]["reason"] == (
        "worker's reply is identical to boss's earlier reply in this turn"
    )
    stop = project.client.post(f"{project.path}/guard", json={"action": "stop"})
    assert stop.status_code == 200 and stop.json()["held"] is None
    assert "you stopped the handoff worker → boss: the turn ended" in notes(project.turn_notes())
    assert project.ask("talk again")[-1].data["state"] == "held"
    picked = project.client.post(
        f"{project.path}/guard", json={"action": "pick", "agent": "worker"}
    )
    assert picked.status_code == 200, picked.text
    events = project.turn()
    assert of_type(events, "routing")[0]["reason"] == (
        "the person picked worker to go on from worker's reply"
    )
    assert replies(events) == [("worker", "complete", "Picked, so I answer.")]


def test_a_handoff_gets_what_is_left_of_the_turn_never_a_fresh_budget(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("@worker go"), said("@boss back to you"))
    project = team(served, budget={"turn_max_tokens": 200, "call_max_tokens": 1000})
    events = project.ask("spend")
    assert events[-1].data == {
        "type": "turn",
        "message": events[0].data["message"]
        if events[0].type == "turn"
        else events[-1].data["message"],
        "state": "budget",
        "reason": "the turn's budget of 200 tokens is spent (240)",
    }
    assert len(sse_server.requests) == 2
    assert "boss was not called; raise the budget to go on" in notes(events)[-1]
    budget = of_type(events, "budget")[-1]
    assert (budget["turn"]["tokens"], budget["project"]["tokens"]) == (240, 240)


def test_the_project_budget_holds_across_turns(served: Served, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(said("One."))
    project = team(served, budget={"max_tokens": 100})
    assert project.ask("first")[-1].data["state"] == "answered"
    events = project.ask("second")
    assert events[-1].data["state"] == "budget"
    assert events[-1].data["reason"] == "the project's budget of 100 tokens is spent (120)"


def test_a_message_sent_during_a_turn_is_queued_never_refused(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("A slow answer to the first " * 4, chunk_size=4, event_pause_s=0.05),
        said("The second answer."),
    )
    project = team(served)
    project.streaming("first")
    queued = project.send("second")
    assert queued["state"] == "queued"
    first = project.turn()
    second = project.turn()
    assert replies(first)[0][0] == "boss" and replies(first)[0][2].startswith("A slow answer")
    assert "a turn is running: your message is queued (1 ahead of it)" in notes(first)
    assert replies(second) == [("boss", "complete", "The second answer.")]
    assert second[-1].data["message"] == queued["message"]


def test_a_message_injected_reaches_the_next_agent_at_the_handoff(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("@worker write it " + "slowly " * 6, chunk_size=4, event_pause_s=0.05),
        said("Written."),
    )
    project = team(served, double_texting="inject")
    project.streaming("write the file")
    assert project.send("in French please")["state"] == "injected"
    events = project.turn()
    assert "[user] in French please" in sent(sse_server, 1)
    assert replies(events)[-1] == ("worker", "complete", "Written.")
    assert project.status()["queue"] == 0


def test_stop_ends_the_turn_and_keeps_what_was_streamed(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("word " * 200, chunk_size=5, event_pause_s=0.03))
    project = team(served)
    project.streaming("talk at length")
    # WHY a second delta: on a loaded machine the stop could land before the second word,
    # and the text kept would be one word.
    project.events_until(lambda e: e.type == "delta")
    stopped = project.client.post(f"{project.path}/stop", json={"scope": "turn"})
    assert stopped.status_code == 202 and stopped.json()["stopped"] is True
    events = project.turn()
    assert events[-1].data["state"] == "stopped"
    assert events[-1].data["reason"] == "the person stopped the turn"
    author, status, text = replies(events)[-1]
    assert (author, status) == ("boss", "stopped") and text.startswith("word word")
    # Stopping the whole project pauses it: the next message waits.
    project.client.post(f"{project.path}/stop", json={"scope": "project"})
    assert project.status()["status"] == "paused"
    assert project.send("later")["state"] == "queued"
    assert project.status()["queue"] == 1


def test_a_command_waits_for_approval_in_the_chat(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("<cmd>echo approved-and-ran</cmd>"), said("It ran."))
    project = ProjectClient.create(served.client())
    project.add("boss", "captain")  # local, so approval "confirm"
    project.send("run it")
    asked = project.events_until(lambda e: e.type == "approval_required")[-1].data
    assert (asked["agent"], asked["command"]) == ("boss", "echo approved-and-ran")
    assert project.status()["approvals"][0]["id"] == asked["id"]
    assert served.client().get("/v1/approvals").json()["approvals"][0]["id"] == asked["id"]
    refused = project.client.post(
        f"{project.path}/approvals/{asked['id']}", json={"approve": False, "always": True}
    )
    assert refused.status_code == 422
    response = project.client.post(
        f"{project.path}/approvals/{asked['id']}", json={"approve": True, "always": True}
    )
    assert response.status_code == 200, response.text
    rules = (served.home.state / "serve" / "approval-rules.toml").read_text()
    assert 'program = "echo"' in rules and 'args = ["approved-and-ran", "**"]' in rules
    events = project.turn()
    decided = of_type(events, "approval_decided")[0]
    assert (decided["id"], decided["action"]) == (asked["id"], "yes")
    result = [e for e in of_type(events, "command") if e["event"]["type"] == "command_result"]
    assert result[0]["event"]["result"]["stdout"] == "approved-and-ran\n"
    assert project.status()["approvals"] == []
    again = project.client.post(f"{project.path}/approvals/{asked['id']}", json={"approve": True})
    assert again.status_code == 409
    assert again.json()["error"].startswith("this command was approved already")
    unknown = project.client.post(f"{project.path}/approvals/{'0' * 16}", json={"approve": True})
    assert unknown.status_code == 404


def test_a_model_that_fails_mid_turn_marks_the_message(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(json_error(400, "the model is not loaded"))
    project = team(served)
    events = project.ask("hi")
    author, status, _ = replies(events)[0]
    assert (author, status) == ("boss", "failed")
    assert "the model is not loaded" in of_type(events, "message_end")[0]["reason"]
    assert events[-1].data["state"] == "failed"


def test_bad_input_is_a_clear_refusal_or_a_note(
    served: Served, sse_server: ScriptedServer, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    client = served.client()
    assert served.client(token="wrong").get("/v1/projects").status_code == 401
    bad_template = client.post(
        "/v1/projects", json={"name": "x", "briefings": {"talon": "You are {{ nmae }}"}}
    )
    assert bad_template.status_code == 422
    assert "unknown placeholders nmae" in bad_template.json()["error"]
    project = team(served)
    same_name = client.post("/v1/projects", json={"name": "demo"})
    assert same_name.status_code == 409 and "exists already" in same_name.json()["error"]
    second_captain = client.post(f"{project.path}/agents", json={"name": "cap2", "role": "captain"})
    assert second_captain.status_code == 409 and "exactly one" in second_captain.json()["error"]
    again = client.post(f"{project.path}/agents", json={"name": "worker"})
    assert again.status_code == 409
    bad_name = client.post(f"{project.path}/agents", json={"name": "Has Space"})
    assert bad_name.status_code == 422 and "name" in bad_name.json()["error"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    beyond = {
        "name": "wide",
        "runner": {"allowed_paths": [{"path": str(outside), "read_only": False}]},
    }
    refused = client.post(f"{project.path}/agents", json=beyond)
    assert refused.status_code == 403
    assert (
        f"refused {outside}: it is outside the paths granted to this caller"
        in refused.json()["error"]
    )
    assert "grant: true" in refused.json()["error"]
    granted = client.post(
        f"{project.path}/agents", json={**beyond, "grant": True, "approval": "auto"}
    )
    assert granted.status_code == 201 and granted.json()["granted"] is True
    audit = read_jsonl(served.home.state / "audit.jsonl")
    assert "grant agent wide" in audit[-1]["command"]
    huge = client.post(f"{project.path}/messages", json={"text": "x" * 60_000})
    assert huge.status_code == 422 and "text" in huge.json()["error"]
    captain_removed = client.delete(f"{project.path}/agents/boss")
    assert captain_removed.status_code == 409 and "promote" in captain_removed.json()["error"]
    assert client.get("/v1/projects/0123456789abcdef").status_code == 404
    assert client.post(f"{project.path}/guard", json={"action": "continue"}).status_code == 409
    bad_resume = client.get(f"{project.path}/events", headers={"last-event-id": "99999"})
    assert bad_resume.status_code == 400
    # An @name that is no agent: a note, then the captain answers.
    sse_server.enqueue(said("Captain here."))
    events = project.ask("@nobody are you there?")
    assert notes(events)[-1].startswith("@nobody is no agent of this project")
    assert replies(events) == [("boss", "complete", "Captain here.")]
    # Promote a talon, then the old captain can go.
    assert (
        client.delete(f"{project.path}/agents/boss", params={"promote": "worker"}).status_code
        == 204
    )
    roles = {a["name"]: a["role"] for a in project.status()["agents"]}
    assert roles == {"worker": "captain", "wide": "talon"}
    sse_server.enqueue(said("Captain worker here."))
    events = project.ask("who leads?")
    briefed = [e for e in of_type(events, "message") if e["kind"] == "briefing"]
    assert briefed[0]["to"] == "worker" and "You are worker, the captain" in briefed[0]["text"]


def test_a_reconnecting_client_gets_every_event_once_and_the_overview_counts(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("one two three four five six", chunk_size=2, event_pause_s=0.05))
    project = team(served)
    project.send("count")
    first = project.events_until(lambda e: e.type == "delta")
    rest = project.turn()
    ids = [e.id for e in first + rest]
    assert ids == list(range(1, len(ids) + 1))
    text = "".join(e.data["text"] for e in first + rest if e.type == "delta")
    assert text == "one two three four five six"
    hierarchy = project.client.get("/v1/hierarchy").json()
    assert hierarchy["projects"][0]["agents"] == [
        {"name": "boss", "role": "captain", "status": "idle"},
        {"name": "worker", "role": "talon", "status": "idle"},
    ]
    project.client.post(f"{project.path}/agents/worker/stop")
    metrics = project.client.get("/v1/metrics").json()
    assert metrics["projects"] == {"active": 1, "paused": 0, "busy": 0}
    assert metrics["agents"] == {"running": 1, "busy": 0, "stopped": 1}
    assert metrics["spend"]["tokens"] == 120


def test_a_restart_mid_turn_ends_the_turn_with_a_note_and_keeps_everything(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("slow " * 400, chunk_size=5, event_pause_s=0.05))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = team(served)
        sent_message = project.streaming("a long task")
        queued = project.send("and then this")
        served.proc.send_signal(signal.SIGKILL)  # no chance to save anything more
        served.proc.wait(10)
    sse_server.enqueue(said("Back again."))
    with serving(home, sse_server, config=AUTO_LOCAL) as again:
        project.client = again.client()
        recovered = project.events_until(
            lambda e: e.type == "turn" and e.data["state"] == "interrupted"
        )
        assert "the server stopped during this turn" in notes(recovered)[-1]
        # The queued message is answered in its turn, after the restart, unasked.
        events = project.turn()
        assert events[-1].data["message"] == queued["message"]
        assert replies(events) == [("boss", "complete", "Back again.")]
        chat = project.client.get(f"{project.path}/messages").json()["messages"]
        assert [(m["author"], m["text"]) for m in chat] == [
            ("logos", "boss (captain) joined the project"),
            ("logos", "worker (talon) joined the project"),
            ("user", "a long task"),
            ("user", "and then this"),
            ("boss", "Back again."),
        ]
        assert chat[2]["id"] == sent_message["message"]
        # The captain read the first message in its cut turn (its session keeps it): it is
        # sent what came after.
        history = [m["content"] for m in sse_server.requests[1].json["messages"]]
        assert any("[user] a long task" in text for text in history[:-1])
        assert "[user] and then this" in history[-1] and "a long task" not in history[-1]
        everything = read_stream(project.client, f"{project.path}/events", stop_after=events[-1].id)
        assert [e.id for e in everything] == list(range(1, len(everything) + 1))
        saved = json.loads(
            (home.state / "serve" / "projects" / project.id / "project.json").read_text()
        )
        assert saved["in_turn"] is None and [a["name"] for a in saved["agents"]] == [
            "boss",
            "worker",
        ]


def test_granted_paths_are_pinned_and_a_project_saved_unpinned_is_pinned_when_loaded(
    home: Home, sse_server: ScriptedServer
) -> None:
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = team(served)
        status = project.status()
    real = os.stat(home.work)
    pinned = {"path": str(home.work), "read_only": False}
    pinned |= {"device": real.st_dev, "inode": real.st_ino}
    assert status["allowed_paths"] == [pinned]
    assert [agent["allowed_paths"] for agent in status["agents"]] == [[pinned], [pinned]]
    saved_path = home.state / "serve" / "projects" / project.id / "project.json"
    saved = json.loads(saved_path.read_text())
    for holder in (saved, *saved["agents"]):
        for path in holder["allowed_paths"]:
            del path["device"], path["inode"]
    saved_path.write_text(json.dumps(saved))
    with serving(home, sse_server, config=AUTO_LOCAL) as again:
        project.client = again.client()
        assert project.status()["allowed_paths"] == [pinned]
    resaved = json.loads(saved_path.read_text())
    assert [p["inode"] for p in resaved["agents"][1]["allowed_paths"]] == [real.st_ino]


def test_a_pending_approval_survives_a_restart_and_resumes_the_right_agent(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("<cmd>echo after-restart</cmd>"))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = ProjectClient.create(served.client())
        project.add("boss", "captain", approval="auto")
        project.add("careful")  # local: confirm
        project.send("@careful run it")
        asked = project.events_until(lambda e: e.type == "approval_required")[-1].data
    sse_server.enqueue(said("<cmd>echo after-restart</cmd>"), said("Ran it after the restart."))
    with serving(home, sse_server, config=AUTO_LOCAL) as again:
        project.client = again.client()
        stale = project.status()["approvals"]
        assert [(a["id"], a["agent"], a["live"]) for a in stale] == [
            (asked["id"], "careful", False)
        ]
        project.events_until(lambda e: e.type == "approval_required" and not e.data["live"])
        decided = project.client.post(
            f"{project.path}/approvals/{asked['id']}", json={"approve": True}
        )
        assert decided.json() == {"id": asked["id"], "agent": "careful"}
        events = project.events_until(lambda e: e.type == "approval_required" and e.data["live"])
        routed = of_type(events, "routing")[0]
        assert routed["agent"] == "careful" and "approved your command" in routed["reason"]
        live = events[-1].data
        project.client.post(f"{project.path}/approvals/{live['id']}", json={"approve": True})
        assert replies(project.turn())[-1] == ("careful", "complete", "Ran it after the restart.")


def test_a_message_that_interrupts_stops_the_turn_and_goes_first(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("talking " * 100, chunk_size=4, event_pause_s=0.03),
        said("Answering the interruption."),
    )
    project = team(served, double_texting="interrupt")
    project.streaming("first")
    assert project.send("stop that, do this")["state"] == "interrupting"
    first = project.turn()
    assert first[-1].data["state"] == "stopped"
    assert first[-1].data["reason"] == "interrupted by a new message from the person"
    assert replies(first)[-1][:2] == ("boss", "stopped")
    second = project.turn()
    assert replies(second) == [("boss", "complete", "Answering the interruption.")]
    assert "[user] stop that, do this" in sent(sse_server, 1)


def test_an_agent_removed_mid_turn_ends_the_turn_with_what_it_did(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("@worker go"),
        said("working " * 100, chunk_size=4, event_pause_s=0.03),
    )
    project = team(served)
    project.send("go")
    project.events_until(lambda e: e.type == "message_start" and e.data["author"] == "worker")
    project.events_until(lambda e: e.type == "delta")
    assert project.client.delete(f"{project.path}/agents/worker").status_code == 204
    events = project.turn()
    assert events[-1].data["state"] == "stopped"
    assert events[-1].data["reason"] == "worker was removed during its turn"
    author, status, text = replies(events)[-1]
    assert (author, status) == ("worker", "stopped") and text.startswith("work")
    assert [a["name"] for a in project.status()["agents"]] == ["boss"]


def test_a_client_that_falls_behind_is_told_where_to_resume(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("x" * 40_000, chunk_size=20))
    with serving(home, sse_server, config=AUTO_LOCAL + "subscriber_buffer = 16\n") as served:
        project = team(served)
        client = served.client()
        with client.stream("GET", f"{project.path}/events") as stream:
            project.send("flood")
            time.sleep(3)  # read nothing while two thousand deltas are published
            lines = list(stream.iter_lines())
        resume = [
            json.loads(line[5:])
            for line in lines
            if line.startswith("data:") and '"resume"' in line
        ]
        assert resume and resume[-1]["type"] == "resume"
        after = resume[-1]["after"]
        assert any(f"reconnect with Last-Event-ID: {after}" in line for line in lines)
        project.seen = after
        rest = project.turn()
        assert rest[0].id == after + 1 and rest[-1].data["state"] == "answered"


def test_pause_resume_goal_progress_and_a_stopped_agent(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("Answered after the pause."), said("The captain answers instead."))
    project = team(served)
    client = project.client
    changed = client.patch(project.path, json={"goal": "greet twice", "progress": "half way"})
    assert changed.status_code == 200
    assert (changed.json()["goal"], changed.json()["progress"]) == ("greet twice", "half way")
    assert client.post(f"{project.path}/pause").json()["status"] == "paused"
    assert project.send("wait for me")["state"] == "queued"
    time.sleep(0.5)
    assert sse_server.requests == [], "a paused project calls no model"
    assert client.post(f"{project.path}/resume").json()["status"] in ("idle", "busy")
    events = project.turn()
    changes = [(e["change"], e["goal"], e["progress"]) for e in of_type(events, "project")]
    assert changes == [
        ("created", "greet the world", ""),
        ("goal", "greet twice", ""),
        ("progress", "greet twice", "half way"),
        ("paused", "greet twice", "half way"),
        ("resumed", "greet twice", "half way"),
    ]
    assert "the project is paused: your message is queued (0 ahead of it)" in notes(events)
    assert replies(events) == [("boss", "complete", "Answered after the pause.")]
    stopped = client.post(f"{project.path}/agents/worker/stop")
    assert stopped.json()["status"] == "stopped"
    events = project.ask("@worker are you there?")
    assert "@worker is stopped: start it to address it; passed on instead" in notes(events)
    assert replies(events) == [("boss", "complete", "The captain answers instead.")]
    assert client.post(f"{project.path}/agents/worker/start").json()["status"] == "idle"
    assert client.post(f"{project.path}/agents/ghost/stop").status_code == 404
    assert client.delete(project.path).status_code == 204
    assert client.get(project.path).status_code == 404
    assert not (served.home.state / "serve" / "projects" / project.id).exists()


def test_a_model_cut_mid_reply_leaves_what_was_streamed_marked(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Half of my answer, and then", chunk_size=4, drop_after=5),
        json_error(400, "the model went away"),
    )
    project = team(served)
    events = project.ask("answer")
    end = of_type(events, "message_end")[0]
    assert (end["author"], end["status"]) == ("boss", "failed")
    assert end["text"].startswith("Half")
    assert "the model went away" in end["reason"]
    assert events[-1].data["state"] == "failed"
    chat = project.client.get(f"{project.path}/messages").json()["messages"]
    assert chat[-1]["author"] == "boss" and chat[-1]["text"].startswith("Half")


def test_a_stopping_server_ends_the_turn_and_keeps_the_routing_state_and_the_spend(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        said("Which port should it use? [listening]"),
        said("slowly " * 300, chunk_size=7, event_pause_s=0.03),
    )
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = team(served)
        project.ask("@worker set it up")
        project.streaming("@boss meanwhile, say something long")
        assert served.stop() == 0  # SIGTERM: the turn ends, saved
    sse_server.enqueue(said("Port 8080 then."))
    with serving(home, sse_server, config=AUTO_LOCAL) as again:
        project.client = again.client()
        ended = project.turn()
        assert ended[-1].data["state"] == "stopped"
        assert ended[-1].data["reason"] == "the server is stopping"
        assert replies(ended)[-1][:2] == ("boss", "stopped")
        status = project.status()
        # Saved: the first reply's usage (the cut one ended before its model told any).
        assert status["spent"]["tokens"] == 120
        assert {a["name"]: a["spent"]["tokens"] for a in status["agents"]} == {
            "boss": 0,
            "worker": 120,
        }
        assert status["listening"] is None  # the person's second message took the claim
        answered = project.ask("8080")
        assert of_type(answered, "routing")[0]["reason"] == "captain by default"
        assert replies(answered) == [("boss", "complete", "Port 8080 then.")]


def test_a_message_injected_into_a_turn_cut_by_a_restart_is_answered_after(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("slow " * 400, chunk_size=5, event_pause_s=0.05))
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = team(served, double_texting="inject")
        project.streaming("a long task")
        injected = project.send("also this")
        assert injected["state"] == "injected"
        served.proc.send_signal(signal.SIGKILL)
        served.proc.wait(10)
    sse_server.enqueue(said("Got the second one."))
    with serving(home, sse_server, config=AUTO_LOCAL) as again:
        project.client = again.client()
        project.events_until(lambda e: e.type == "turn" and e.data["state"] == "interrupted")
        events = project.turn()
        assert events[-1].data["message"] == injected["message"]
        assert replies(events) == [("boss", "complete", "Got the second one.")]


def test_a_handoff_without_a_command_is_not_checked_back(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("@worker go"), said("Done."))
    config = "[serve]\nallow_local_auto = true\n"  # the server checks back by default
    with serving(home, sse_server, config=config) as served:
        project = team(served)
        events = project.ask("delegate")
    assert replies(events) == [("boss", "complete", "@worker go"), ("worker", "complete", "Done.")]
    assert len(sse_server.requests) == 2


def test_stopping_the_agent_that_answers_ends_its_call_and_the_turn(
    served: Served, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(said("thinking " * 200, chunk_size=5, event_pause_s=0.03))
    project = team(served)
    project.streaming("go")
    stopped = project.client.post(f"{project.path}/agents/boss/stop")
    assert stopped.json()["status"] == "stopped"
    events = project.turn()
    assert events[-1].data["state"] == "stopped" and events[-1].data["reason"] == "boss was stopped"
    assert replies(events)[-1][:2] == ("boss", "stopped")
    changes = [(e["agent"], e["change"]) for e in of_type(events, "agent")]
    assert ("boss", "stopped") in changes
    nobody = project.send("anyone?")
    events = project.turn()
    assert events[-1].data == {
        "type": "turn",
        "message": nobody["message"],
        "state": "no-agent",
        "reason": "nobody can answer: the captain is stopped",
    }


def test_agents_are_told_of_changes_of_the_team(served: Served, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(said("Hello."), said("Noted, welcome."))
    project = ProjectClient.create(served.client())
    project.add("boss", "captain", approval="auto")
    project.ask("hi")
    first = sent(sse_server, 0)
    assert "joined the project" not in first  # its briefing holds the roster
    project.add("newcomer", approval="auto")
    project.ask("we have help")
    assert "[logos] newcomer (talon) joined the project\n[user] we have help" in sent(sse_server, 1)
