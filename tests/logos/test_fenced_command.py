"""Commands written in a Markdown fence instead of a `<cmd>` block."""

from __future__ import annotations

import pytest

from logos.protocol.fenced_command import find_fenced_command

FENCED = [
    ("Let me look:\n```bash\nls -la\n```", "ls -la"),
    ("```sh\n# first the tree\n\ncat setup.py\n```", "cat setup.py"),
    ("```shell\n$ pytest -q\n```", "pytest -q"),
    ("```console\n$ make test\nok\n```", "make test"),
    ("```Bash title=run\ngrep -rn TODO src\n```", "grep -rn TODO src"),
    ("~~~bash\nfind . -name '*.py'\n~~~", "find . -name '*.py'"),
    ("   ````bash\ngit status\n````", "git status"),
    ("```\n$ ls\n```", "ls"),
    ("```\npython3 -m pytest tests\n```", "python3 -m pytest tests"),
    ("```\n./configure --prefix=/usr\n```", "./configure --prefix=/usr"),
    ("I will run:\n```bash\nls\n", "ls"),  # a fence the reply never closed
    ("```bash\r\necho price is $ 5\r\n```\r\n```bash\npwd\n```", "echo price is $ 5"),
]

NOT_FENCED = [
    "All done: the tests pass.",
    "Inline `ls -la` is prose, not a fence.",
    "```python\nprint('hi')\n```",
    '```json\n{"a": 1}\n```',
    "```\nThe output was empty.\n```",
    "```bash\n# nothing but a comment\n\n```",
    "```bash\n```",
    "```text\n$ ls\n```",
    "    ls -la\n(an indented block is not a fence)",
]


@pytest.mark.parametrize(("prose", "command"), [*FENCED, *((prose, None) for prose in NOT_FENCED)])
def test_commands_in_shell_fences_are_found_and_nothing_else(
    prose: str, command: str | None
) -> None:
    assert find_fenced_command(prose) == command


def test_the_first_fence_with_a_command_wins() -> None:
    prose = "```python\nx = 1\n```\nthen\n```bash\nls\n```\n```bash\npwd\n```"
    assert find_fenced_command(prose) == "ls"


def test_a_long_command_is_shortened() -> None:
    found = find_fenced_command("```bash\necho " + "x" * 500 + "\n```")
    assert found is not None and found.startswith("echo x") and len(found) <= 80
