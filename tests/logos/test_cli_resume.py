"""`logos resume` continues a recorded conversation; `logos show` renders one for reading."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_harness import (
    ANSI_ESCAPE,
    Home,
    anthropic_env,
    logos,
    read_jsonl,
    run_task,
    sent_messages,
)
from tests.support.sse_server import Reply, ScriptedServer, anthropic_stream, openai_stream

HEADER = (
    '{"type": "run", "version": 1, "logos_version": "0", "provider": "openai", '
    '"model": "m", "base_url": null, "runner": "local", "cwd": "/", '
    '"started_at": "t", "system_prompt": "s"}'
)


def first_run(home: Home, server: ScriptedServer, *then: Reply) -> Path:
    """A recorded run of two turns (a command, then an answer); `then` are the model's
    replies for what the test does next."""
    server.enqueue(
        openai_stream("Looking.\n<cmd>printf 'line %s\\n' 1 2 3 4 5 6 7 8</cmd>"),
        openai_stream("There are 8 lines."),
    )
    done = run_task(home, server, "count lines", model="first-model")
    assert done.returncode == 0, done.stderr
    server.enqueue(*then)
    return home.only_run()


@pytest.mark.timeout(60)
def test_resume_sends_the_earlier_conversation_and_appends(
    home: Home, sse_server: ScriptedServer
) -> None:
    path = first_run(home, sse_server, openai_stream("Half of 8 is 4."))
    done = logos(["resume", str(path), "and half of that?", "--yes"], home, home.env())

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Half of 8 is 4.\n"
    request = sse_server.requests[2]
    assert request.json["model"] == "first-model"  # from the trajectory's header
    messages = sent_messages(sse_server, 2)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == "count lines"
    assert "<cmd>printf" in messages[1]["content"] and "line 8" in messages[2]["content"]
    assert messages[3]["content"] == "There are 8 lines."
    assert messages[4]["content"] == "and half of that?"
    system = request.json["messages"][0]["content"]
    assert system == read_jsonl(path)[0]["system_prompt"]
    assert home.runs() == [path]  # appended, not a new file
    types = [r["type"] for r in read_jsonl(path)]
    assert types.count("run") == 1 and types.count("prompt") == 2 and types.count("done") == 2


@pytest.mark.timeout(60)
def test_resume_keeps_the_recorded_prompt_when_only_the_day_changed(
    home: Home, sse_server: ScriptedServer
) -> None:
    path = first_run(home, sse_server)
    records = read_jsonl(path)
    header = records[0]
    today = dt.date.today().isoformat()
    assert today in header["system_prompt"]
    header["started_at"] = "2020-01-15T12:00:00.000Z"
    header["system_prompt"] = header["system_prompt"].replace(today, "2020-01-15")
    path.write_text("".join(json.dumps(record) + "\n" for record in records))

    sse_server.enqueue(openai_stream("Still 8."))
    done = logos(["resume", str(path), "again?", "--yes"], home, home.env())
    assert done.returncode == 0, done.stderr
    assert sse_server.requests[2].json["messages"][0]["content"] == header["system_prompt"]


@pytest.mark.timeout(60)
def test_resume_sends_a_new_prompt_when_the_setup_changed(
    home: Home, sse_server: ScriptedServer, tmp_path: Path
) -> None:
    path = first_run(home, sse_server)
    recorded = read_jsonl(path)[0]["system_prompt"]
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text('prompt_extra = "House rule: be terse."\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sse_server.enqueue(openai_stream("Noted."), openai_stream("Moved."))

    same_place = logos(["resume", str(path), "again", "--yes"], home, home.env())
    assert same_place.returncode == 0, same_place.stderr
    system = sse_server.requests[2].json["messages"][0]["content"]
    assert "House rule: be terse." in system and system != recorded

    moved = logos(
        ["resume", str(path), "here", "--yes", "--allow", f"{elsewhere}:rw"], home, home.env()
    )
    assert moved.returncode == 0, moved.stderr
    assert str(elsewhere) in sse_server.requests[3].json["messages"][0]["content"]


@pytest.mark.timeout(60)
def test_resume_defaults_to_continue_and_flags_override_the_model(
    home: Home, sse_server: ScriptedServer
) -> None:
    path = first_run(home, sse_server, openai_stream("Continuing."))
    done = logos(["resume", "--model", "other-model", "--yes", str(path)], home, home.env())
    assert done.returncode == 0, done.stderr
    assert sse_server.requests[2].json["model"] == "other-model"
    assert sent_messages(sse_server, 2)[-1] == {"role": "user", "content": "Continue."}


@pytest.mark.timeout(60)
def test_resume_keeps_anthropic_reasoning_and_its_signature(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(anthropic_stream("Done thinking.", thinking="deep thought", signature="sig"))
    env = anthropic_env(home, sse_server)
    assert (
        logos(["--model", "claude-x", "--yes", "--no-check-back", "think"], home, env).returncode
        == 0
    )
    sse_server.enqueue(anthropic_stream("Again."))
    done = logos(["resume", str(home.only_run()), "more"], home, env | {"CI": ""}, stdin="")
    assert done.returncode == 2 and "--yes" in done.stderr  # still no terminal to confirm on
    done = logos(["resume", str(home.only_run()), "more", "--yes", "--no-check-back"], home, env)
    assert done.returncode == 0, done.stderr
    assistant = sent_messages(sse_server, 1)[1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "deep thought",
        "signature": "sig",
    }


@pytest.mark.timeout(60)
def test_a_line_cut_by_a_crash_is_skipped_and_cut_off_on_resume(
    home: Home, sse_server: ScriptedServer
) -> None:
    path = first_run(home, sse_server)
    with path.open("a") as damaged:
        damaged.write('{"type": "step", "role": "assis')
    shown = logos(["show", str(path)], home, home.env())
    assert shown.returncode == 0 and "incomplete" in shown.stderr
    sse_server.enqueue(openai_stream("Still here."))
    done = logos(["resume", str(path), "still there?", "--yes"], home, home.env())
    assert done.returncode == 0, done.stderr
    assert "skipped the last line" in done.stderr
    records = read_jsonl(path)  # every line parses again
    assert records[-1]["type"] == "done" and records[-2]["content"] == "Still here."


def test_a_damaged_line_inside_the_file_is_an_error_naming_it(home: Home) -> None:
    path = home.root / "run.jsonl"
    path.write_text(
        HEADER + "\n"
        '{"type": "prompt", "content": 3, "time": "t"}\n'
        '{"type": "prompt", "content": "fine", "time": "t"}\n'
    )
    done = logos(["show", str(path)], home, home.env())
    assert done.returncode == 2
    assert f"{path}, line 2: invalid prompt record (content:" in done.stderr


def test_show_of_something_else_says_so(home: Home) -> None:
    path = home.root / "notes.jsonl"
    path.write_text('{"hello": 1}\n')
    done = logos(["show", str(path)], home, home.env())
    assert done.returncode == 2 and "is not a logos trajectory" in done.stderr
    missing = logos(["show", str(home.root / "nope.jsonl")], home, home.env())
    assert missing.returncode == 2 and "no trajectory at" in missing.stderr


@pytest.mark.timeout(60)
def test_show_renders_a_run_for_reading(home: Home, sse_server: ScriptedServer) -> None:
    path = first_run(home, sse_server)
    done = logos(["show", str(path)], home, home.env())
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "openai first-model" in text
    assert "> count lines" in text and "Looking." in text
    assert "✓ printf 'line %s\\n' 1 2 3 4 5 6 7 8" in text
    assert "  ⋮ 2 more lines" in text and "│ line 8" in text and "│ line 2" not in text
    assert "There are 8 lines." in text
    assert text.rstrip().splitlines()[-1].startswith("final answer · 2 turns")
    assert not ANSI_ESCAPE.search(text)


def test_show_into_a_reader_that_stops_early_ends_quietly(home: Home) -> None:
    path = home.root / "long.jsonl"
    prompts = "".join(
        f'{{"type": "prompt", "content": "prompt number {i}", "time": "t"}}\n' for i in range(4000)
    )
    path.write_text(HEADER + "\n" + prompts)
    proc = subprocess.Popen(
        [sys.executable, "-m", "logos", "show", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=home.env(),
        cwd=home.work,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"run ")
    proc.stdout.close()  # like `logos show FILE | head -1`
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 0, stderr
    assert stderr == ""


def test_show_says_what_to_give_for_a_directory_or_a_newer_format(home: Home) -> None:
    directory = logos(["show", str(home.work)], home, home.env())
    assert directory.returncode == 2
    assert "Is a directory" in directory.stderr and ".jsonl" in directory.stderr
    newer = home.root / "newer.jsonl"
    newer.write_text(HEADER.replace('"version": 1', '"version": 2') + "\n")
    done = logos(["show", str(newer)], home, home.env())
    assert done.returncode == 2
    assert "not a logos trajectory" not in done.stderr
    assert "newer logos" in done.stderr and "upgrade logos" in done.stderr
