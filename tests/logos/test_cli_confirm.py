"""The confirm prompt on a real pseudo-terminal: yes, no with a reason, always, edit."""

from __future__ import annotations

import re
import signal
import stat

import pytest

from logos.approvals.approval import EDITED_NOTE
from tests.support.cli_harness import SGR, Home, PtySession, openai_env, sent_messages, strip_ansi
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(60)

QUESTION = r"\[y\]es  \[n\]o  \[a\]lways for this run  \[e\]dit  > "


def session(home: Home, server: ScriptedServer, *args: str, **env: str) -> PtySession:
    return PtySession(["--model", "m", *args], home, openai_env(home, server, **env))


def test_yes_runs_and_no_sends_the_reason_to_the_model(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(
        openai_stream("Two steps.\n<cmd>touch approved</cmd>\n<cmd>touch declined</cmd>\n"),
        openai_stream("Understood, I left it."),
    )
    terminal = session(home, sse_server, "make two files")
    try:
        terminal.expect("touch approved")
        terminal.expect(QUESTION)
        terminal.send("y\n")
        terminal.expect("touch declined")
        terminal.expect(QUESTION)
        terminal.send("n\n")
        terminal.expect(r"why not\? \(sent to the model; Enter to skip\) > ")
        terminal.send("it is too risky\n")
        terminal.expect("Understood, I left it.")
        assert terminal.wait() == 0
    finally:
        terminal.close()

    assert (home.work / "approved").exists() and not (home.work / "declined").exists()
    envelope = sent_messages(sse_server, 1)[-1]["content"]
    assert "error: the user declined to run this command: it is too risky" in envelope
    audit = home.audit()
    assert [(a["action"], a["command"], a["reason"]) for a in audit] == [
        ("yes", "touch approved", None),
        ("no", "touch declined", "it is too risky"),
    ]
    assert all(a["mode"] == "confirm" for a in audit)
    assert stat.S_IMODE((home.state / "audit.jsonl").stat().st_mode) == 0o600
    approvals = [line for line in home.only_run().read_text().splitlines() if '"approval"' in line]
    assert len(approvals) == 2 and "it is too risky" in approvals[1]


def test_always_approves_the_rest_of_the_run(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(
        openai_stream("<cmd>echo first</cmd>"),
        openai_stream("<cmd>echo second</cmd>\n<cmd>echo third</cmd>"),
        openai_stream("All three ran."),
    )
    terminal = session(home, sse_server, "three commands")
    try:
        terminal.expect(QUESTION)
        terminal.send("a\n")
        terminal.expect("All three ran.")
        assert terminal.wait() == 0
        assert terminal.output.count("run this command?") == 1
    finally:
        terminal.close()
    actions = sorted((a["command"], a["action"]) for a in home.audit())
    assert actions == [("echo first", "always"), ("echo second", "auto"), ("echo third", "auto")]


def test_edit_runs_the_typed_command_and_the_model_is_told(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>rm -rf important</cmd>"), openai_stream("Fine."))
    terminal = session(home, sse_server, "clean up")
    try:
        terminal.expect(QUESTION)
        terminal.send("e\n")
        terminal.expect(r"new command \(Enter keeps it\) > ")
        terminal.send("echo kept it\n")
        terminal.expect("Fine.")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    envelope = sent_messages(sse_server, 1)[-1]["content"]
    assert "$ echo kept it\n" in envelope and "kept it\n</stdout>" in envelope
    assert EDITED_NOTE.strip() in envelope
    (decision,) = home.audit()
    assert decision["action"] == "edit" and decision["command"] == "rm -rf important"
    assert decision["edited_command"] == "echo kept it"


def test_edit_opens_the_editor_when_one_is_set(home: Home, sse_server: ScriptedServer) -> None:
    editor = home.root / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "echo from the editor\\n" > "$1"\n')
    editor.chmod(0o755)
    sse_server.enqueue(openai_stream("<cmd>echo original</cmd>"), openai_stream("Ok."))
    terminal = session(home, sse_server, "edit it", EDITOR=str(editor))
    try:
        terminal.expect(QUESTION)
        terminal.send("e\n")
        terminal.expect("will run instead:")
        terminal.expect("Ok.")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert "$ echo from the editor" in sent_messages(sse_server, 1)[-1]["content"]


def test_on_a_terminal_prose_streams_to_stdout_and_the_answer_is_not_repeated(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("The answer is plain.", chunk_size=3, event_pause_s=0.01))
    terminal = session(home, sse_server, "--yes", "--no-check-back", "answer")
    try:
        terminal.expect("The answer is plain.")
        terminal.expect("final answer · 1 turn")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert terminal.output.count("The answer is plain.") == 1
    assert SGR.search(terminal.output)  # a terminal gets colours…


def test_no_color_turns_every_colour_off(home: Home, sse_server: ScriptedServer) -> None:
    sse_server.enqueue(openai_stream("<cmd>ls /nonexistent</cmd>"), openai_stream("Gone."))
    terminal = session(home, sse_server, "look", NO_COLOR="1")
    try:
        terminal.expect(QUESTION)
        terminal.send("y\n")
        terminal.expect("final answer")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert "✗ ls /nonexistent  exit 2" in terminal.output
    assert not SGR.search(terminal.output)  # …unless NO_COLOR is set


def test_ctrl_c_at_the_question_runs_nothing_and_ends_the_question_line(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("<cmd>touch never</cmd>"))
    terminal = session(home, sse_server, "make a file")
    try:
        terminal.expect(QUESTION)
        terminal.proc.send_signal(signal.SIGINT)
        assert terminal.wait() == 130
    finally:
        terminal.close()
    assert not (home.work / "never").exists()
    assert re.search(r"\[e\]dit  > \n+stopping: ", strip_ansi(terminal.output))
    assert home.audit() == []  # no decision was made
    assert home.run_records()[-1]["stop_reason"] == "canceled"
