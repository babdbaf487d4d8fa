"""Approval rules: verdicts by program and arguments through the shell lexer, strictest part
wins, what cannot be read asks, and examples checked at load."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import anyio
import pytest

from logos.approvals.approval import ApprovalDecision
from logos.approvals.rules import (
    ApprovalRules,
    RuledApprover,
    RulesError,
    Verdict,
    load_rules,
    parse_rules,
)

RULES_TOML = """
[[rule]]
name = "git reads"
verdict = "auto"
program = "git"
args = ["status|diff|log", "**"]
match = ["git status", "git log -n 3", "git diff --stat"]
no_match = ["git push", "git -C /tmp status", "./git status", "gitk status"]

[[rule]]
name = "git push asks"
verdict = "confirm"
program = "git"
args = ["**", "push", "**"]
match = ["git push", "git -C repo push origin main", "sudo git push"]
no_match = ["git status", "git pushy"]

[[rule]]
name = "listing"
verdict = "auto"
program = "ls|cat|head"
match = ["ls -la", "cat README.md"]

[[rule]]
name = "no force"
verdict = "deny"
program = "rm"
args = ["-rf|-fr", "**"]
reason = "delete files one by one, by name"
match = ["rm -rf build", "xargs rm -rf"]
no_match = ["rm file"]
"""


@pytest.fixture(scope="module")
def rules() -> ApprovalRules:
    return parse_rules(tomllib.loads(RULES_TOML), "test")


@pytest.mark.parametrize(
    ("line", "default", "expected"),
    [
        ("git status", "confirm", "auto"),
        ("git status --short", "confirm", "auto"),
        ("git push", "auto", "confirm"),
        ("git status && git push", "auto", "confirm"),
        ("git status | head -3", "confirm", "auto"),
        ("ls; rm -rf /", "auto", "deny"),
        ("echo $(git push)", "auto", "confirm"),
        ("bash -c 'git push --force'", "auto", "confirm"),
        ("eval git push", "auto", "confirm"),
        ("sudo git push", "auto", "confirm"),
        ("env A=1 git push", "auto", "confirm"),
        ("A=1 git status", "confirm", "confirm"),
        ("./git status", "confirm", "confirm"),
        ("/usr/bin/git status", "confirm", "confirm"),
        ("git status > ~/.bashrc", "confirm", "confirm"),
        ("git status > /dev/null 2>&1", "confirm", "auto"),
        ("cat README.md", "confirm", "auto"),
        ("make test", "confirm", "confirm"),
        ("make test", "auto", "auto"),
        ("$TOOL status", "auto", "confirm"),
        ("git status 'unclosed", "auto", "confirm"),
        ("git status $(ls", "auto", "confirm"),
        ("cat <<EOF\nno end", "auto", "confirm"),
        ("", "confirm", "confirm"),
    ],
)
def test_verdict_of_a_command_line(
    rules: ApprovalRules, line: str, default: Verdict, expected: Verdict
) -> None:
    assert rules.verdict(line, default).verdict == expected


def test_the_verdict_names_the_rule_that_decided(rules: ApprovalRules) -> None:
    decided = rules.verdict("git status; rm -rf x", "auto")
    assert decided.verdict == "deny"
    assert decided.why == "approval rule 'no force'"
    assert "program is an expansion" in rules.verdict("$X", "auto").why


def test_nesting_too_deep_to_read_asks(rules: ApprovalRules) -> None:
    line = "echo " + "$(" * 40 + "ls" + ")" * 40
    assert rules.verdict(line, "auto").verdict == "confirm"


@pytest.mark.timeout(20)
def test_many_words_and_wildcards_take_linear_time() -> None:
    many = parse_rules(
        {
            "rule": [
                {
                    "name": "wide",
                    "verdict": "confirm",
                    "program": "x",
                    "args": ["**", "a", "**", "b", "**", "c", "**", "never"],
                    "match": ["x a b c never"],
                }
            ]
        },
        "test",
    )
    line = "x " + " ".join(["a b c"] * 20_000)
    assert many.verdict(line, "auto").verdict == "auto"


def _decide(approver: RuledApprover, command: str) -> ApprovalDecision:
    async def main() -> ApprovalDecision:
        return await approver.decide(command)

    return anyio.run(main)


class _Asked:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def decide(self, command: str) -> ApprovalDecision:
        self.asked.append(command)
        return ApprovalDecision("yes", command)


def test_the_approver_runs_asks_and_refuses_by_the_rules(rules: ApprovalRules) -> None:
    person = _Asked()
    approver = RuledApprover(rules, "confirm", person)
    assert _decide(approver, "git status").action == "auto"
    assert _decide(approver, "git push").action == "yes"
    refused = _decide(approver, "rm -rf build")
    assert refused.action == "no"
    assert refused.reason == (
        "the approval rules refuse it (approval rule 'no force'): delete files one by one, by name"
    )
    assert person.asked == ["git push"]


def test_without_anyone_to_ask_a_confirm_verdict_is_refused(rules: ApprovalRules) -> None:
    decision = _decide(RuledApprover(rules, "auto", None), "git push")
    assert decision.action == "no"
    assert "needs a person's approval (approval rule 'git push asks')" in (decision.reason or "")
    assert _decide(RuledApprover(rules, "auto", None), "make").action == "auto"


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            {
                "name": "r",
                "verdict": "auto",
                "program": "git",
                "args": ["status"],
                "match": ["git status -s"],
            },
            "rule 'r' does not match its example 'git status -s'",
        ),
        (
            {
                "name": "r",
                "verdict": "confirm",
                "program": "git",
                "match": ["git push"],
                "no_match": ["sudo git log"],
            },
            "rule 'r' matches 'sudo git log', which it lists under no_match",
        ),
        (
            {"name": "r", "verdict": "auto", "program": "git", "match": ["git"], "colour": 1},
            "unknown key 'rule.0.colour'",
        ),
        (
            {"name": "r", "verdict": "maybe", "program": "git", "match": ["git"]},
            "rule.0.verdict",
        ),
        (
            {"name": "r", "verdict": "auto", "program": "git"},
            "missing key 'rule.0.match'",
        ),
    ],
)
def test_a_bad_rule_is_a_load_error_naming_it(rule: dict[str, object], message: str) -> None:
    with pytest.raises(RulesError, match="approval rules test: .*" + re.escape(message)):
        parse_rules({"rule": [rule]}, "test")


def test_two_rules_of_one_name_are_refused() -> None:
    rule = {"name": "r", "verdict": "auto", "program": "ls", "match": ["ls"]}
    with pytest.raises(RulesError, match="two rules are named 'r'"):
        parse_rules({"rule": [rule, rule]}, "test")


def test_load_rules_reads_a_file_and_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(RULES_TOML)
    assert [rule.name for rule in load_rules(path).rules] == [
        "git reads",
        "git push asks",
        "listing",
        "no force",
    ]
    path.write_text("[[rule]\n")
    with pytest.raises(RulesError, match="is not valid TOML"):
        load_rules(path)
    with pytest.raises(RulesError, match="does not exist"):
        load_rules(tmp_path / "missing.toml")


def test_the_readme_example_loads() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "approvals.md").read_text()
    section = page[page.index("## Approval rules") :]
    opening = '```toml title="rules.toml"\n'
    example = section[section.index(opening) + len(opening) : section.index("```\n\n")]
    rules = parse_rules(tomllib.loads(example), "README")
    assert rules.verdict("git status", "confirm").verdict == "auto"
    assert rules.verdict("git push", "auto").verdict == "confirm"
    assert rules.verdict("rm -rf build", "auto").verdict == "deny"
