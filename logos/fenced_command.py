"""Spot a command that a model wrote in a Markdown code fence instead of a `<cmd>` block.

Small models often answer a task with a ```` ```bash ```` fence holding the command they
mean to run, and no block: taken as the final answer, the run would end without acting.
The loop treats such a reply like a fake tool call (`logos.hallucination`); whether a
fence is a command that was meant to run depends on the run (a final answer may well show
one), so this module only finds it.

A fence is a CommonMark fenced code block (``` or ~~~, up to three spaces of indent, closed
by a like fence at least as long, or by the end of the text). It holds a command when it
is labelled bash, sh, shell, zsh or console and has a line that is not blank or a comment,
or when it is unlabelled and its first line is a prompt (`$ ls`) or starts with a common
command (`ls`, `python3`, `./configure`). A leading `$ ` prompt is not part of the command.
"""

from __future__ import annotations

import re

_MAX_COMMAND_CHARS = 80
_SHELL_LABELS = frozenset({"bash", "sh", "shell", "zsh", "console"})
# A common command (or a ./script) at the start of an unlabelled fence's first line.
_COMMON_COMMAND = re.compile(
    r"(?:\./\S+|apt|apt-get|awk|bash|cargo|cat|cd|chmod|cp|curl|docker|du|echo|find|gcc|git"
    r"|go|grep|head|ls|make|mkdir|mv|node|npm|npx|pip|pip3|pwd|pytest|python|python3|rg|rm"
    r"|sed|sh|sort|sudo|tail|tar|touch|tree|uv|wc|wget)(?:[ \t]|$)"
)
_OPENING = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*")
_PROMPT = re.compile(r"\$[ \t]+")


def find_fenced_command(prose: str) -> str | None:
    """The first command written in a shell code fence in `prose` (its first command line,
    without a `$ ` prompt), else None."""
    lines = prose.split("\n")
    index = 0
    while index < len(lines):
        opening = _OPENING.fullmatch(lines[index])
        index += 1
        if opening is None:
            continue
        fence, label = opening.group(1), opening.group(2).lower()
        closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t\r]*")
        body: list[str] = []
        while index < len(lines) and not closing.fullmatch(lines[index]):
            body.append(lines[index])
            index += 1
        index += 1
        command = _command_in(label, body)
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
    if _PROMPT.match(first):
        return _without_prompt(first)
    return first if _COMMON_COMMAND.match(first) else None


def _without_prompt(line: str) -> str:
    prompt = _PROMPT.match(line)
    return line[prompt.end() :] if prompt else line
