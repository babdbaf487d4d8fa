"""Every `logos` command the README shows (its shell blocks, and what its MCP client
configurations launch) parses: each flag exists and takes what the README gives it."""

from __future__ import annotations

import pytest

from logos.cli.arguments import UsageError, build_parser, with_command
from logos.cli.project_command import SERVERS_SANDBOX
from tests.support.readme import readme_commands

COMMANDS = readme_commands("logos")


def test_the_readme_shows_the_commands_this_test_reads() -> None:
    shown = {" ".join(words[1:3]) for words in COMMANDS}
    assert {
        "serve",
        "project create",
        "project agent",
        "mcp --sandbox",
        "batch examples/tasks.jsonl",
    } <= shown


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(words) for words in COMMANDS])
def test_a_command_the_readme_shows_parses(words: list[str]) -> None:
    try:
        build_parser().parse_args(with_command(words[1:]))
    except UsageError as exc:
        pytest.fail(f"the README's `{' '.join(words)}`: {exc.message}")


def test_sandbox_takes_its_kind_or_none_wherever_the_readme_uses_it() -> None:
    parser = build_parser()

    def sandbox(*words: str) -> object:
        return parser.parse_args(with_command(list(words))).sandbox

    agent = ("project", "agent", "parser", "tester")
    assert sandbox(*agent, "--sandbox", "--path", "/src") == SERVERS_SANDBOX
    assert sandbox(*agent, "--sandbox", "temenos", "--path", "/src") == "temenos"
    assert sandbox(*agent, "--path", "/src", "--sandbox") == SERVERS_SANDBOX
    assert sandbox(*agent) is None
    assert sandbox("--sandbox", "fix the test") == "sandboxd"
    assert sandbox("--sandbox", "temenos", "fix the test") == "temenos"
    assert sandbox("mcp", "--sandbox", "--allow", "/src:rw") == "sandboxd"
    assert sandbox("batch", "t.jsonl", "--out", "o", "--sandbox") == "sandboxd"
