"""Spot a command that a model wrote in a Markdown code fence instead of a `<cmd>` block.

Small models often answer a task with a ```` ```bash ```` fence holding the command they
mean to run, and no block: taken as the final answer, the run would end without acting.
The loop treats such a reply like a fake tool call (`logos.protocol.hallucination`); whether a
fence is a command that was meant to run depends on the run (a final answer may well show
one), so this module only finds it.

A fence (`logos.protocol.code_fences`) holds a command when it is labelled bash, sh, shell, zsh or
console and has a line that is not blank or a comment, or when it is unlabelled and its
first line looks like a command: a prompt (`$ ls`), or a common command (`ls`, `python3`,
`./configure`) at its start. A leading `$ ` prompt is not part of the command.
"""

from __future__ import annotations

import re

from logos.protocol.code_fences import code_fences

_MAX_COMMAND_CHARS = 80
_SHELL_LABELS = frozenset({"bash", "sh", "shell", "zsh", "console"})
# A common command (or a ./script) at the start of an unlabelled fence's first line.
_COMMON_COMMAND = re.compile(
    r"(?:\./\S+|apt|apt-get|awk|bash|cargo|cat|cd|chmod|cp|curl|docker|du|echo|find|gcc|git"
    r"|go|grep|head|ls|make|mkdir|mv|node|npm|npx|pip|pip3|pwd|pytest|python|python3|rg|rm"
    r"|sed|sh|sort|sudo|tail|tar|touch|tree|uv|wc|wget)(?:[ \t]|$)"
)
_PROMPT = re.compile(r"\$[ \t]+")


def find_fenced_command(prose: str) -> str | None:
    """The first command written in a shell code fence in `prose` (its first command line,
    without a `$ ` prompt), else None."""
    for fence in code_fences(prose.split("\n")):
        command = _command_in(fence.label, fence.body)
        if command is not None:
            return command[:_MAX_COMMAND_CHARS]
    return None


def _command_in(label: str, body: list[str]) -> str | None:
    lines = [line.strip() for line in body if line.strip()]
    if label in _SHELL_LABELS:
        prompted = [line for line in lines if _PROMPT.match(line)]
        commands = prompted or [line for line in lines if not line.startswith("#")]
        return _without_prompt(commands[0]) if commands else None
    if label or not lines:
        return None
    first = lines[0]
    return _without_prompt(first) if looks_like_command(first) else None


def looks_like_command(line: str) -> bool:
    """Whether a line of text reads as a shell command: a `$ ` prompt, or a common command
    at its start."""
    return bool(_PROMPT.match(line) or _COMMON_COMMAND.match(line))


def _without_prompt(line: str) -> str:
    prompt = _PROMPT.match(line)
    return line[prompt.end() :] if prompt else line
