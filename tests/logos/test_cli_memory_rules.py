"""The `logos` command's memory notes (`logos memory`, injected into new runs' system
prompts) and approval rules (`--approval-rules`, `approval_rules` in the config file)."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.cli_harness import Home, PtySession, logos, openai_env
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.timeout(60)

RULES = """
[[rule]]
name = "reads"
verdict = "auto"
program = "echo|ls"
match = ["echo hi", "ls -la"]

[[rule]]
name = "no deletes"
verdict = "deny"
program = "rm"
reason = "move files to ./trash instead"
match = ["rm -f x"]

[[rule]]
name = "pushes ask"
verdict = "confirm"
program = "git"
args = ["**", "push", "**"]
match = ["git push"]
no_match = ["git status"]
"""


def test_memory_notes_are_kept_by_normalised_key(home: Home) -> None:
    env = home.env()
    saved = logos(["memory", "set", "  Build Command ", "make -j4 test"], home, env)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout == "saved 'build command'\n"
    assert logos(["memory", "show", "BUILD COMMAND"], home, env).stdout == "make -j4 test\n"
    from_stdin = logos(["memory", "set", "style", "-"], home, env, stdin="tabs, not spaces\n")
    assert from_stdin.returncode == 0
    listed = logos(["memory", "list"], home, env).stdout.splitlines()
    assert [line.split("\t")[0] for line in listed] == ["style", "build command"]
    path = home.state / "memory.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert {n["key"] for n in json.loads(path.read_text())["notes"]} == {"style", "build command"}
    assert logos(["memory", "forget", "Style"], home, env).stdout == "forgot 'style'\n"
    missing = logos(["memory", "forget", "style"], home, env)
    assert missing.returncode == 1 and "no note 'style' to forget" in missing.stderr
    bad = logos(["memory", "set", "a\tb", "x"], home, env)
    assert bad.returncode == 2 and "control characters" in bad.stderr


def test_new_runs_get_the_notes_and_resumed_runs_keep_their_prompt(
    home: Home, sse_server: ScriptedServer
) -> None:
    env = openai_env(home, sse_server)
    logos(["memory", "set", "build command", "make -j4 test"], home, env)
    sse_server.enqueue(openai_stream("Hello."), openai_stream("Again."))
    first = logos(["--model", "m", "--no-check-back", "--approve", "never-run", "hi"], home, env)
    assert first.returncode == 0, first.stderr
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert "- build command: make -j4 test" in system
    logos(["memory", "set", "later", "added after the run started"], home, env)
    resumed = logos(
        ["resume", str(home.only_run()), "more", "--approve", "never-run", "--no-check-back"],
        home,
        env,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert sse_server.requests[1].json["messages"][0]["content"] == system


def test_memory_prompt_chars_bounds_the_notes_and_names_those_left_out(
    home: Home, sse_server: ScriptedServer
) -> None:
    env = openai_env(home, sse_server)
    for number in range(5):
        logos(["memory", "set", f"note {number}", "x" * 40], home, env)
    home.config_file.parent.mkdir(parents=True, exist_ok=True)
    home.config_file.write_text("memory_prompt_chars = 120\n")
    sse_server.enqueue(openai_stream("Hello."))
    done = logos(["--model", "m", "--no-check-back", "--approve", "never-run", "hi"], home, env)
    assert done.returncode == 0, done.stderr
    system = sse_server.requests[0].json["messages"][0]["content"]
    assert "- note 4: " + "x" * 40 in system and "- note 3: " + "x" * 40 in system
    assert (
        "(3 older notes are left out to keep this prompt short: 'note 2', 'note 1', 'note 0'.)"
        in system
    )


def test_exec_follows_the_rules_and_cannot_ask(home: Home) -> None:
    rules = home.root / "rules.toml"
    rules.write_text(RULES)
    message = "<cmd>echo ran</cmd><cmd>rm -f keep.txt</cmd><cmd>git push</cmd>"
    (home.work / "keep.txt").write_text("kept")
    done = logos(["exec", "--yes", "--approval-rules", str(rules)], home, home.env(), stdin=message)
    assert done.returncode == 1
    assert "ran" in done.stdout
    assert "the approval rules refuse it (approval rule 'no deletes'): move files to ./trash" in (
        done.stdout
    )
    assert "it needs a person's approval (approval rule 'pushes ask')" in done.stdout
    assert (home.work / "keep.txt").exists()
    assert [(a["action"], a["command"]) for a in home.audit()] == [
        ("auto", "echo ran"),
        ("no", "rm -f keep.txt"),
        ("no", "git push"),
    ]


def test_a_bad_rules_file_is_refused_before_anything_runs(home: Home) -> None:
    rules = home.root / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "ls"\nverdict = "auto"\nprogram = "ls"\nargs = []\nmatch = ["ls -l"]\n'
    )
    home.config_file.parent.mkdir(parents=True, exist_ok=True)
    home.config_file.write_text(f'approval_rules = "{rules}"\n')
    done = logos(["exec", "--yes"], home, home.env(), stdin="<cmd>touch made</cmd>")
    assert done.returncode == 2
    assert "rule 'ls' does not match its example 'ls -l'" in done.stderr
    assert not (home.work / "made").exists()


def test_on_a_terminal_rules_run_some_commands_unasked_and_ask_for_others(
    home: Home, sse_server: ScriptedServer
) -> None:
    rules = home.root / "rules.toml"
    rules.write_text(RULES)
    sse_server.enqueue(
        openai_stream("<cmd>echo unasked</cmd>\n<cmd>touch asked</cmd>"), openai_stream("Done.")
    )
    env = openai_env(home, sse_server)
    terminal = PtySession(
        ["--model", "m", "--no-check-back", "--approval-rules", str(rules), "go"], home, env
    )
    try:
        terminal.expect("touch asked")
        terminal.expect(r"\[y\]es")
        terminal.send("y\n")
        terminal.expect("Done.")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert (home.work / "asked").exists()
    assert [(a["action"], a["command"]) for a in home.audit()] == [
        ("auto", "echo unasked"),
        ("yes", "touch asked"),
    ]
    assert os.path.exists(home.only_run())
