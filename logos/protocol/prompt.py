"""The system prompt: a template in `prompts/`, rendered with runtime facts.

Two styles. `full` (`prompts/system.md`) explains the whole protocol — concurrency, limits,
jobs, what comes back — for models that can use every word of it. `compact`
(`prompts/compact.md`) is a few sentences, plus one worked example
(`logos.protocol.worked_examples`) sent as the conversation's first turns, for small local
models: measured on the small-task suite (`bench/small_tasks.py`), a 0.5B model loses the
thread in the full text and copies its phrases, while it follows an example it sees as
real turns far more often than the same example told in prose.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform as _platform
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal, TypeAlias

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")

DocumentedCommands = Sequence[str] | Mapping[str, str]
"""Commands worth knowing about: lines of text, or name → what it does."""
PromptStyle: TypeAlias = Literal["full", "compact"]
PROMPT_STYLES: tuple[PromptStyle, ...] = ("full", "compact")
_TEMPLATES: Mapping[PromptStyle, str] = {"full": "system.md", "compact": "compact.md"}


def build_system_prompt(
    working_dir: str | None = None,
    platform: str | None = None,
    date: str | _dt.date | None = None,
    commands: DocumentedCommands = (),
    extra: str = "",
    loop_commands: Sequence[str] = (),
    style: PromptStyle = "full",
    sandbox_note: str = "",
) -> str:
    """Render the system prompt; unspecified facts are read from this machine.

    `sandbox_note`: what the sandbox commands run in lets them see (a sandbox kind's
    `prompt_note`), before `extra`; `platform` is then the sandbox's.

    `loop_commands`: the usage lines of the commands the loop answers itself
    (`logos.commands.family.CommandFamily.usage`); the compact style leaves them and
    `commands` out (the loop still answers them, and a job's start says how to wait for
    it)."""
    if isinstance(date, _dt.date):
        date = date.isoformat()
    values = {
        "working_dir": working_dir or os.getcwd(),
        "platform": platform or _describe_platform(),
        "date": date or _dt.date.today().isoformat(),
        "commands": _commands_section(commands),
        "loop_commands": _loop_commands_section(loop_commands),
        "extra": _extra_section(sandbox_note, extra),
    }
    rendered = _PLACEHOLDER.sub(lambda match: values[match.group(1)], load_template(style))
    return rendered.rstrip() + "\n"


def _describe_platform() -> str:
    system = _platform.system()
    if system == "Linux":
        try:
            distro = _platform.freedesktop_os_release().get("PRETTY_NAME", "")
        except OSError:
            distro = ""
        name = f"Linux ({distro})" if distro else "Linux"
    else:
        name = system or "unknown"
    return f"{name}, {_platform.machine()}, shell bash"


@cache
def load_template(style: PromptStyle = "full") -> str:
    """The template shipped in the package, or the repository's copy in a source checkout."""
    name = _TEMPLATES[style]
    packaged = resources.files("logos").joinpath("prompts", name)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[2] / "prompts" / name).read_text("utf-8")


def _extra_section(*parts: str) -> str:
    text = "\n".join(part.strip() for part in parts if part.strip())
    return f"\n{text}\n" if text else ""


def _commands_section(commands: DocumentedCommands) -> str:
    if isinstance(commands, Mapping):
        lines = [f"- `{name}`: {about}" for name, about in commands.items()]
    else:
        lines = [f"- {line}" for line in commands]
    if not lines:
        return ""
    return "\n## Commands available here\n" + "\n".join(lines) + "\n"


def _loop_commands_section(lines: Sequence[str]) -> str:
    if not lines:
        return ""
    bullets = "\n".join(f"- {line}" for line in lines)
    return (
        "\n## Commands this harness answers itself\n"
        "A block that is exactly one of these commands is answered by this harness, not by "
        f"the shell:\n{bullets}\n"
    )
