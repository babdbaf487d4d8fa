"""The system prompt: the template in `prompts/system.md`, rendered with runtime facts."""

from __future__ import annotations

import datetime as _dt
import os
import platform as _platform
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")

DocumentedCommands = Sequence[str] | Mapping[str, str]
"""Commands worth knowing about: lines of text, or name → what it does."""


def build_system_prompt(
    working_dir: str | None = None,
    platform: str | None = None,
    date: str | _dt.date | None = None,
    commands: DocumentedCommands = (),
    extra: str = "",
    loop_commands: Sequence[str] = (),
) -> str:
    """Render the system prompt; unspecified facts are read from this machine.

    `loop_commands`: the usage lines of the commands the loop answers itself
    (`logos.loop_commands.CommandFamily.usage`)."""
    if isinstance(date, _dt.date):
        date = date.isoformat()
    values = {
        "working_dir": working_dir or os.getcwd(),
        "platform": platform or describe_platform(),
        "date": date or _dt.date.today().isoformat(),
        "commands": _commands_section(commands),
        "loop_commands": _loop_commands_section(loop_commands),
        "extra": f"\n{extra.strip()}\n" if extra.strip() else "",
    }
    rendered = _PLACEHOLDER.sub(lambda match: values[match.group(1)], load_template())
    return rendered.rstrip() + "\n"


def describe_platform() -> str:
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
def load_template() -> str:
    """The template shipped in the package, or the repository's copy in a source checkout."""
    packaged = resources.files("logos").joinpath("prompts", "system.md")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parent.parent / "prompts" / "system.md").read_text("utf-8")


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
