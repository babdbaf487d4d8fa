"""An agent's briefing: its role's instructions, sent inline with its first message.

Rendered from `prompts/project-captain.md` and `prompts/project-talon.md` (or a project's
own templates) with `{{ placeholder }}`s. A project's templates are rendered once as it is
made, so a template that cannot render is refused then, never found out in a failed turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from logos.serve.projects.directives import LISTENING_MARKER
from logos.serve.projects.wire import BriefingTemplates, Role

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_BRACES = re.compile(r"\{\{|\}\}")
_PLACEHOLDERS = ("project", "goal", "description", "captain", "name", "role", "roster", "handoff")
_HANDOFF_SYNTAX = (
    "To hand the work to another agent, start a line with @name and say what it should do "
    '(or write <handoff to="name">what to do</handoff>); it answers next. Names inside '
    "commands, code or quotes are no handoff. Hand off only when the other agent has "
    "something to do; to answer the person, write no handoff. To ask the person a question "
    f"and get their next message, end your reply with {LISTENING_MARKER}."
)


class BriefingError(ValueError):
    """A template cannot render: the message says where and what to do."""


@dataclass(frozen=True)
class Member:
    name: str
    role: Role


def render(template: str, values: Mapping[str, str], *, source: str) -> str:
    unknown = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - set(values))
    if unknown:
        raise BriefingError(
            f"the {source} briefing names unknown placeholders {', '.join(unknown)}: use only "
            + ", ".join("{{ " + name + " }}" for name in _PLACEHOLDERS)
        )
    rendered = _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
    stray = _BRACES.search(_PLACEHOLDER.sub("", template))
    if stray is not None:
        raise BriefingError(
            f"the {source} briefing has an unmatched {stray.group(0)!r} (at character "
            f"{stray.start()} once its placeholders are taken out): write placeholders as "
            "{{ name }}"
        )
    return rendered.strip() + "\n"


def briefing(
    role: Role,
    *,
    templates: BriefingTemplates,
    project: str,
    goal: str,
    description: str,
    name: str,
    roster: Sequence[Member],
) -> str:
    captain = next((member.name for member in roster if member.role == "captain"), "(none)")
    lines = [
        f"- {member.name} ({member.role}{', you' if member.name == name else ''})"
        for member in roster
    ]
    values = {
        "project": project,
        "goal": goal or "(not set yet)",
        "description": description,
        "captain": captain,
        "name": name,
        "role": role,
        "roster": "\n".join(lines) or "- (nobody yet)",
        "handoff": _HANDOFF_SYNTAX,
    }
    own = templates.captain if role == "captain" else templates.talon
    source = f"project's {role}" if own is not None else f"shipped {role}"
    return render(own if own is not None else shipped(role), values, source=source)


def check_templates(templates: BriefingTemplates, project: str, goal: str) -> None:
    """Render both roles' briefings with a sample roster; BriefingError if one cannot."""
    roster = (Member("captain", "captain"), Member("talon", "talon"))
    roles: tuple[Role, ...] = ("captain", "talon")
    for role in roles:
        briefing(
            role,
            templates=templates,
            project=project,
            goal=goal,
            description="",
            name=role,
            roster=roster,
        )


@cache
def shipped(role: Role) -> str:
    """The template shipped in the package, or the repository's copy in a source checkout."""
    name = f"project-{role}.md"
    packaged = resources.files("logos").joinpath("prompts", name)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[3] / "prompts" / name).read_text("utf-8")
