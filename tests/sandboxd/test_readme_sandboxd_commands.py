"""Every `sandboxd` command the README shows (its shell blocks, and what its MCP client
configurations launch) parses: each flag exists and takes what the README gives it."""

from __future__ import annotations

import contextlib
import io

import pytest

from sandboxd.cli import build_parser
from tests.support.readme import readme_commands

COMMANDS = readme_commands("sandboxd")


def test_the_readme_shows_the_commands_this_test_reads() -> None:
    shown = {words[1] for words in COMMANDS}
    assert {"serve", "stop", "doctor", "run", "status", "gc", "mcp", "build-image"} <= shown


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(words) for words in COMMANDS])
def test_a_command_the_readme_shows_parses(words: list[str]) -> None:
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            build_parser().parse_args(words[1:])
    except SystemExit:
        pytest.fail(f"the README's `{' '.join(words)}`: {said.getvalue().strip()}")
