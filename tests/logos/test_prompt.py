"""The system prompt template renders with runtime facts and says what the protocol needs."""

from __future__ import annotations

import datetime as dt

from logos import build_system_prompt
from logos.protocol.prompt import load_template


def test_renders_environment_facts() -> None:
    prompt = build_system_prompt(
        working_dir="/srv/app", platform="Linux, x86_64", date=dt.date(2026, 1, 2)
    )
    assert "Working directory: /srv/app" in prompt
    assert "Platform: Linux, x86_64" in prompt
    assert "Date: 2026-01-02" in prompt
    assert "{{" not in prompt


def test_defaults_come_from_this_machine() -> None:
    prompt = build_system_prompt()
    assert dt.date.today().isoformat() in prompt
    assert "Platform: " in prompt and "bash" in prompt


def test_explains_the_protocol() -> None:
    prompt = build_system_prompt().lower()
    for must_say in (
        "<cmd>",
        "concurrently",
        "&&",
        "non-interactive",
        "time-limited",
        "<result>",
        "without any",
    ):
        assert must_say in prompt, must_say


def test_documented_commands_and_extra() -> None:
    with_map = build_system_prompt(commands={"rg": "fast search"}, extra="Answer in French.")
    assert "- `rg`: fast search" in with_map and with_map.rstrip().endswith("Answer in French.")
    with_lines = build_system_prompt(commands=["`jq` for JSON"])
    assert "- `jq` for JSON" in with_lines
    assert "Commands available here" not in build_system_prompt()


def test_template_is_the_shipped_file() -> None:
    assert "{{working_dir}}" in load_template()
