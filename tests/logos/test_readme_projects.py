"""The team tutorial (docs/tutorials/team.md), its project commands run as written (read out
of the page, the usage lines too) by a newcomer's shell: `logos serve` on a port of its own
choosing (`--port 0`, which the docs offer), a real sandboxd started as the sandbox tutorial
says, a scripted model; the project commands find the server with no flag, and a talon
added with `--sandbox` works there."""

from __future__ import annotations

import re
import signal
import subprocess
from typing import Any

import pytest

from tests.support.docs_pages import DOCS, blocks
from tests.support.readme import (
    command_bin,
    newcomer_env,
    read_until,
    readme_daemon,
    readme_line,
    run_line,
    serving_line,
    shell_lines,
)
from tests.support.sandboxd_harness import short_dir
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


TEAM = DOCS / "tutorials" / "team.md"


def project_line(action: str) -> str:
    """The team tutorial's `logos project ACTION …` line."""
    for found in blocks(TEAM):
        if found.language == "sh":
            for line in shell_lines(found.text):
                if line.startswith(f"logos project {action} "):
                    return line
    raise AssertionError(f"the team tutorial shows no `logos project {action}`")


def without_options(line: str) -> str:
    """A usage line with its `[...]` optional parts left out."""
    return re.sub(r"\s*\[[^]]*\]", "", line)


def with_options(line: str) -> str:
    """A usage line with its `[...]` optional parts given."""
    return line.replace("[", "").replace("]", "")


def test_the_projects_section_works_as_written_against_a_server_on_any_port(
    docker_client: Any, sse_server: ScriptedServer
) -> None:
    root = short_dir("rdp")
    home = root / "home"
    (home / "src" / "parser" / "tests").mkdir(parents=True)
    env = newcomer_env(
        command_bin(root / "bin"),
        home,
        OPENAI_BASE_URL=sse_server.base_url + "/v1",
        OPENAI_API_KEY="test-key",
    )
    sse_server.enqueue(
        openai_stream("<cmd>ls</cmd>"),
        openai_stream("@tester write the lexer"),
        openai_stream("<cmd>echo lexer > lexer.txt</cmd>"),
        openai_stream("@boss the lexer is written"),
        openai_stream("@tester write the lexer once more"),
        openai_stream("Done: lexer.txt is in the tests."),
    )
    serve = readme_line("Start the servers", "logos serve").rstrip(" &") + " --port 0"
    record = home / ".local" / "state" / "logos" / "serve" / "address.json"

    def run(line: str) -> str:
        done = run_line(line, env, home)
        assert done.returncode == 0, f"`{line}`:\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    with (
        readme_daemon(docker_client, env, root),
        serving_line(serve, env, home, lambda out: "serving on http" in out, "logos serve"),
    ):
        assert record.stat().st_mode & 0o777 == 0o600
        project_id = run(project_line("create")).strip()
        assert run(project_line("agent parser boss")) == "boss: captain, local, approval confirm\n"
        assert run(project_line("agent parser tester")) == "tester: talon, sandbox, approval auto\n"

        with subprocess.Popen(
            ["bash", "-c", project_line("send")],
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as sending:
            asked = read_until(sending, r"  approve: logos project approve parser \w+")
            approval = re.findall(r"approve parser (\w+)", asked)[-1]
            approve = without_options(project_line("approve")).replace("APPROVAL_ID", approval)
            assert run(approve) == "approved (boss)\n"
            chat, errors = sending.communicate(timeout=120)
        assert sending.returncode == 0, errors
        held = (asked + chat).splitlines()
        assert held[0] == "you: write the lexer first"
        assert "? boss wants to run: ls" in held
        assert "→ tester (@tester named by boss: write the lexer)" in held
        assert "  $ echo lexer > lexer.txt" in held
        assert held[-1] == "— turn held: boss → tester again: the same handoff twice in one turn"

        resumed = run(project_line("guard")).splitlines()
        assert resumed[-2:] == [
            "Done: lexer.txt is in the tests.",
            "— turn answered: tester answered (no handoff)",
        ]

        with subprocess.Popen(
            ["bash", "-c", f"exec {project_line('follow')}"],
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as following:
            whole = read_until(following, "— turn answered")
            following.send_signal(signal.SIGINT)
            _, errors = following.communicate(timeout=30)
        assert following.returncode == 130 and "Traceback" not in errors, errors
        assert whole.splitlines()[:3] == [
            "· boss (captain) created",
            "· tester (talon) created",
            "you: write the lexer first",
        ]

        stop = project_line("stop")
        assert run(without_options(stop)) == "no turn was running\n"
        assert run(with_options(stop)).splitlines() == [
            "no turn was running",
            "the project is paused: `logos project resume parser` goes on",
        ]
        listed = run("logos project list")
    assert (home / "src" / "parser" / "tests" / "lexer.txt").read_text() == "lexer\n"
    assert f"{project_id}  parser  paused" in listed
    assert "  tester (talon, sandbox): idle" in listed
    assert not record.exists(), "logos serve left its address behind"
