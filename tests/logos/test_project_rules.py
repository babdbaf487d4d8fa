"""The projects' pure rules: directives, routing, guards, budgets, context, briefings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logos.options import AllowedPath
from logos.options.declarations import ALLOW, ALLOW_HOST, NETWORK
from logos.options.narrowing import Asked, narrow
from logos.options.option import Option
from logos.serve.projects.briefing import BriefingError, Member, briefing, check_templates
from logos.serve.projects.budget import allowance, level_spent
from logos.serve.projects.context import context_for
from logos.serve.projects.directives import directives, listens, without_marker
from logos.serve.projects.guards import TurnGuard
from logos.serve.projects.permissions import pinned, project_ceiling
from logos.serve.projects.routing import route_handoff, route_user_message
from logos.serve.projects.wire import (
    BriefingTemplates,
    BudgetRequest,
    ChatEntry,
    ProjectRecord,
    Spend,
)

AGENTS = ["boss", "talon-1", "talon-2"]


def test_a_directive_is_a_name_at_a_line_start_or_a_handoff_block() -> None:
    text = (
        "Done with the parser.\n@talon-1 please write the tests\n"
        '<handoff to="talon-2">docs</handoff>'
    )
    assert [(d.target, d.note) for d in directives(text)] == [
        ("talon-1", "please write the tests"),
        ("talon-2", "docs"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I asked @talon-1 yesterday",  # not at a line's start
        "<cmd>echo '@talon-1 go'\n@talon-1 x</cmd>",
        "```\n@talon-1 in a fence\n```",
        "> @talon-1 quoted line",
        '"@talon-1 in quotation marks"',
        "run `@talon-1` inline",
    ],
)
def test_no_directive_inside_commands_code_or_quotes(text: str) -> None:
    assert directives(text) == []


def test_a_directives_note_keeps_its_inline_code_as_written() -> None:
    text = "Sure.\n@worker please add `total` to calc.py <cmd>ls</cmd>\n```\n@boss x\n```"
    assert [(d.target, d.note) for d in directives(text)] == [
        ("worker", "please add `total` to calc.py")
    ]
    block = '<handoff to="worker">rename `a`\nto `b`</handoff>'
    assert [(d.target, d.note) for d in directives(block)] == [("worker", "rename `a` to `b`")]


def test_the_listening_marker_ends_a_reply_outside_code() -> None:
    assert listens("Which database should I use? [listening]\n")
    assert not listens("<cmd>echo [listening]</cmd>")
    assert without_marker("Which one? [listening]") == "Which one?"


def test_the_user_routes_by_name_then_the_listener_then_the_captain() -> None:
    route = lambda text, listening=None: route_user_message(  # noqa: E731
        text, agents=AGENTS, available=AGENTS, captain="boss", listening=listening
    )
    named = route("@talon-2 look at this", listening="talon-1")
    assert (named.agent, named.reason) == ("talon-2", "@talon-2 named by the user")
    listened = route("postgres", listening="talon-1")
    assert listened.agent == "talon-1" and "claimed the next message" in listened.reason
    default = route("hello")
    assert (default.agent, default.reason) == ("boss", "captain by default")
    unknown = route("@nobody hi")
    assert unknown.agent == "boss"
    assert unknown.notes == (
        "@nobody is no agent of this project (agents: boss, talon-1, talon-2); passed on instead",
    )


def test_a_stopped_agent_named_is_a_note_and_no_captain_is_nobody() -> None:
    stopped = route_user_message(
        "@talon-1 hi", agents=AGENTS, available=["boss"], captain="boss", listening=None
    )
    assert stopped.agent == "boss" and "stopped" in stopped.notes[0]
    nobody = route_user_message("hi", agents=[], available=[], captain=None, listening=None)
    assert nobody.agent is None and "no captain" in nobody.reason


def test_a_handoff_to_itself_or_a_stranger_is_a_note_not_a_route() -> None:
    decision = route_handoff(
        "talon-1", "@talon-1 me again\n@ghost you\n", agents=AGENTS, available=AGENTS
    )
    assert decision.agent is None
    assert decision.notes == (
        "talon-1 named itself (@talon-1): a handoff goes to another agent",
        "talon-1 handed off to @ghost, which is no agent of this project",
    )
    onward = route_handoff("boss", "@talon-1: write it", agents=AGENTS, available=AGENTS)
    assert (onward.agent, onward.reason) == ("talon-1", "@talon-1 named by boss: write it")


def test_the_guard_trips_on_a_repeated_edge_an_identical_reply_and_idle_hops() -> None:
    guard = TurnGuard(max_hops=8, max_rounds=3)
    assert guard.reply("boss", "do it", ran_commands=True) is None
    assert guard.handoff("boss", "talon-1") is None
    assert guard.reply("talon-1", "done", ran_commands=True) is None
    assert guard.handoff("talon-1", "boss") is None  # reporting back is fine
    assert guard.handoff("boss", "talon-1") == (
        "boss → talon-1 again: the same handoff twice in one turn"
    )
    same = TurnGuard(max_hops=8, max_rounds=3)
    same.reply("boss", "Over to you.", ran_commands=False)
    assert same.reply("talon-1", "over  to you.", ran_commands=False) == (
        "talon-1's reply is identical to boss's earlier reply in this turn"
    )
    idle = TurnGuard(max_hops=8, max_rounds=3, idle_hops=2)
    for source, target in (("a", "b"), ("b", "c")):
        idle.reply(source, f"{source} talks", ran_commands=False)
        assert idle.handoff(source, target) is None
    idle.reply("c", "c talks", ran_commands=False)
    assert "without a command" in (idle.handoff("c", "d") or "")


def test_the_hop_cap_is_the_last_resort() -> None:
    guard = TurnGuard(max_hops=2, max_rounds=9)
    assert guard.handoff("a", "b") is None
    assert guard.handoff("b", "c") is None
    assert guard.handoff("c", "d") == "2 handoffs in this turn, the most max_hops allows"


def test_an_allowance_is_the_least_of_call_turn_and_project() -> None:
    budget = BudgetRequest(max_tokens=10_000, turn_max_tokens=3_000, call_max_tokens=2_000)
    fresh = allowance(budget, Spend(tokens=0), Spend(tokens=0))
    assert (fresh.tokens, fresh.exhausted) == (2_000, None)
    # A handoff gets what is left of the turn, never a fresh budget.
    later = allowance(budget, Spend(tokens=2_500), Spend(tokens=2_500))
    assert later.tokens == 500
    dollars = BudgetRequest(max_cost_usd=1.0, turn_max_cost_usd=0.5, call_max_wall_s=30)
    priced = allowance(dollars, Spend(cost_usd=0.7), Spend(cost_usd=0.1))
    assert (priced.cost_usd, priced.wall_s, priced.tokens) == (pytest.approx(0.3), 30, None)
    spent = allowance(budget, Spend(tokens=9_000), Spend(tokens=3_000))
    assert spent.exhausted == "tokens"
    assert level_spent(budget, Spend(tokens=9_000), Spend(tokens=3_000)) == (
        "the turn's budget of 3000 tokens is spent (3000)"
    )


def test_the_context_is_what_others_said_since_the_last_turn_with_an_exact_omission() -> None:
    chat = [
        ChatEntry(seq=i, id=str(i), author="user", text=f"message {i} " + "x" * 200)
        for i in range(1, 101)
    ]
    chat.append(ChatEntry(seq=101, id="o", author="talon-1", text="mine"))
    chat.append(
        ChatEntry(seq=102, id="p", author="boss", text="built it", commands=["`make` → exit 0"])
    )
    text, omitted = context_for({"talon-1"}, chat, since=10, upto=102, max_tokens=600)
    lines = text.splitlines()
    assert lines[0] == f"[logos] {omitted} earlier messages omitted"
    shown = [line for line in lines if line.startswith("[user] message")]
    assert omitted + len(shown) == 90  # messages 11..100; its own reply is never sent
    assert "mine" not in text
    assert text.endswith("[boss] built it\n  (boss ran: `make` → exit 0)")


def test_a_briefing_names_the_project_the_captain_the_roster_and_the_syntax() -> None:
    text = briefing(
        "talon",
        templates=BriefingTemplates(),
        project="parser",
        goal="parse TOML",
        description="",
        name="talon-1",
        roster=[Member("boss", "captain"), Member("talon-1", "talon")],
    )
    assert 'You are talon-1, a talon (a worker) of the project "parser"' in text
    assert "whose captain is\nboss" in text
    assert "- talon-1 (talon, you)" in text and "[listening]" in text


def test_a_template_that_cannot_render_is_refused_with_where() -> None:
    with pytest.raises(BriefingError, match=r"unknown placeholders nam"):
        check_templates(BriefingTemplates(talon="Hi {{ nam }}"), "p", "g")
    with pytest.raises(BriefingError, match=r"unmatched '\{\{'"):
        check_templates(BriefingTemplates(captain="Hi {{ name"), "p", "g")


def test_an_agent_may_not_reach_beyond_its_project(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for made in ("work/sub", "workshop", "srv/x"):
        (tmp_path / made).mkdir(parents=True)
    project = ProjectRecord(
        id="p",
        name="p",
        goal="",
        description="",
        budget=BudgetRequest(),
        allowed_paths=[pinned(str(tmp_path / "work"), False), pinned(str(tmp_path / "srv"), True)],
        allowed_hosts=["pypi.org", "*.python.org"],
        double_texting="queue",
        max_hops=8,
        max_rounds=3,
        context_tokens=4000,
        briefings=BriefingTemplates(),
        created_at="",
    )

    def beyond(option: Option[Any], value: object) -> list[str]:
        asked = [Asked(option, option.name, value)]
        return [r.what for r in narrow(project_ceiling(project, sandbox=True), asked).refusals]

    def path(where: Path, read_only: bool) -> list[AllowedPath]:
        return [AllowedPath(str(where), read_only)]

    assert beyond(ALLOW, path(tmp_path / "work" / "sub", False)) == []
    [outside] = beyond(ALLOW, path(tmp_path / "workshop", True))
    assert outside.startswith(
        f"refused {tmp_path / 'workshop'}: it is outside the paths granted to this caller"
    )
    [read_only] = beyond(ALLOW, path(tmp_path / "srv" / "x", False))
    assert read_only.startswith(
        f"refused {tmp_path / 'srv' / 'x'} read-write: the paths granted to this caller hold it "
        "only read-only"
    )
    assert beyond(ALLOW_HOST, ["pypi.org", "evil.example"]) == [
        "host evil.example is not among the project's hosts"
    ]
    assert beyond(NETWORK, True) == [
        "network access to every host, which the project does not give"
    ]
