"""`logos project …` against a real `logos serve`: make a project, add agents, send a
message and read the chat the terminal prints."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from logos.cli.project_chat import ChatPrinter
from tests.support.cli_harness import Home, logos, make_home
from tests.support.sandboxd_harness import short_dir
from tests.support.serve_harness import AUTO_LOCAL, Served, serving
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(120)


def _cli(served: Served, home: Home) -> Callable[..., str]:
    """`logos project ARGS` against `served`: its output, once it succeeded."""

    def project(*args: str) -> str:
        done = logos(["project", "--url", served.url, *args], home, home.env())
        assert done.returncode == 0, done.stderr
        return done.stdout

    return project


def test_a_project_made_and_followed_from_the_terminal(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("@helper count the files"),
        openai_stream("<cmd>echo 3 files</cmd>"),
        openai_stream("There are 3 files."),
    )
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = _cli(served, home)

        project_id = project("create", "files", "--goal", "count files").strip()
        assert len(project_id) == 16
        assert project("agent", "files", "boss", "--captain", "--approval", "auto") == (
            "boss: captain, local, approval auto\n"
        )
        project("agent", project_id, "helper", "--approval", "auto")
        chat = project("send", "files", "how many files?")
        listed = project("list")
        missing = logos(["project", "--url", served.url, "send", "nope", "hi"], home, home.env())
    lines = chat.splitlines()
    assert lines[0] == "you: how many files?"
    assert "→ boss (captain by default)" in lines
    assert "→ helper (@helper named by boss: count the files)" in lines
    assert "  $ echo 3 files" in lines and "  │ 3 files" in lines and "  └ exit 0" in lines
    assert lines[-2:] == [
        "There are 3 files.",
        "— turn answered: helper answered (no handoff)",
    ]
    assert f"{project_id}  files  idle" in listed and "  helper (talon, local): idle" in listed
    assert missing.returncode != 0
    assert "no project 'nope' on this server (projects: files)" in missing.stderr


def test_a_guard_is_answered_from_the_terminal(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        openai_stream("@helper check it"),
        openai_stream("@boss checked"),
        openai_stream("@helper check it once more"),
        openai_stream("Checked twice."),
    )
    with serving(home, sse_server, config=AUTO_LOCAL) as served:
        project = _cli(served, home)

        project("create", "checks")
        project("agent", "checks", "boss", "--captain", "--approval", "auto")
        project("agent", "checks", "helper", "--approval", "auto")
        held = project("send", "checks", "check it")
        resumed = project("guard", "checks", "continue")
    assert "! boss → helper again: the same handoff twice in one turn" in held
    assert "  answer: logos project guard checks continue | stop | pick AGENT" in held
    assert (
        held.splitlines()[-1]
        == "— turn held: boss → helper again: the same handoff twice in one turn"
    )
    lines = resumed.splitlines()
    assert "→ helper (the person let boss's handoff go on)" in lines
    assert lines[-2:] == ["Checked twice.", "— turn answered: helper answered (no handoff)"]


def test_logos_project_reaches_a_server_on_a_unix_socket(sse_server: ScriptedServer) -> None:
    root = short_dir("project")
    home = make_home(root)
    socket_path = root / "logos.sock"
    sse_server.enqueue(openai_stream("Over the socket."))
    with serving(home, sse_server, ["--socket", str(socket_path)], config=AUTO_LOCAL) as served:
        assert served.url == str(socket_path)
        project = _cli(served, home)
        project("create", "local")
        project("agent", "local", "boss", "--captain", "--approval", "auto")
        chat = project("send", "local", "hello")
    assert chat.splitlines()[-2:] == [
        "Over the socket.",
        "— turn answered: boss answered (no handoff)",
    ]


def test_the_answers_printed_name_the_project_as_the_person_named_it() -> None:
    out = io.StringIO()
    printer = ChatPrinter(out, "my team")
    printer.show(
        "approval_required",
        {"agent": "boss", "summary": "rm -rf build", "id": "0a1b2c3d4e5f6a7b"},
    )
    printer.show("guard", {"reason": "boss → helper again"})
    assert out.getvalue().splitlines() == [
        "? boss wants to run: rm -rf build",
        "  approve: logos project approve 'my team' 0a1b2c3d4e5f6a7b [--deny] [--always]",
        "! boss → helper again",
        "  answer: logos project guard 'my team' continue | stop | pick AGENT",
    ]
