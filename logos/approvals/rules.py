"""Approval rules: which commands run unasked, which always ask and which never run, by
program and arguments. One TOML file serves the `logos` command and the server.

    [[rule]]
    name = "git reads"
    verdict = "auto"                 # auto, confirm or deny
    program = "git"
    args = ["status|diff|log", "**"]
    match = ["git status", "git log -n 3"]
    no_match = ["git push", "git -C /tmp status"]

A command line is split by the project's shell lexer (`logos.approvals.shell_lexer`), never
matched as raw text. `program` and each of `args` are shell-style patterns (`*`, `?`, `[…]`) on one
word, with `|` between alternatives; `**` in `args` stands for any number of words, and
`args` must cover every argument (the default, `["**"]`, allows any). Every rule carries
examples, checked when the file is loaded: a rule whose `match` examples it does not match,
or whose `no_match` examples it does, is a load error naming the rule.

How a command's verdict is decided, from the least to the most strict: auto, confirm, deny.

* An `auto` rule applies only to a simple command whose first word is its program by
  name, as found on PATH (`./git` and `/tmp/git` are not `git`; a prefix `A=1` is not the
  program either), and only when its output goes to no file but /dev/null.
* A `confirm` or `deny` rule applies wherever its program appears in the command's words
  (by file name), so `sudo git push`, `xargs git push` and `env A=1 git push` ask as
  `git push` does.
* A simple command takes the strictest verdict of the rules that apply to it, or, when none
  does, the approval mode's (auto or confirm). A command line (`a && b`, pipes, `$(…)`,
  scripts run by `bash -c`, `eval`, heredocs fed to a shell) takes the strictest verdict of
  its parts.
* What the lexer cannot read asks: a program named by an expansion (`$TOOL x`), a quote,
  substitution or heredoc left open, nesting too deep to follow.

This is a convenience for people approving commands, not a security boundary: the sandbox
is one.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from logos.approvals.approval import (
    ApprovalDecision,
    ApprovalMode,
    Approver,
    AutoApprover,
    NeverRunApprover,
)
from logos.approvals.shell_lexer import SimpleCommand, TooDeep, embedded_scripts, lex_script
from logos.errors import describe_invalid

Verdict: TypeAlias = Literal["auto", "confirm", "deny"]
_STRICTNESS: dict[Verdict, int] = {"auto": 0, "confirm": 1, "deny": 2}
ANY_WORDS = "**"
_QUIET_TARGETS = frozenset({"/dev/null"})
_WRITING_REDIRECTIONS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})


class RulesError(Exception):
    """A rules file that cannot be used: the message names the file, the rule and the fix."""


class _RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    verdict: Verdict
    program: str = Field(min_length=1)
    args: list[str] = Field(default_factory=lambda: [ANY_WORDS])
    match: list[str] = Field(min_length=1)
    """Commands the rule must apply to (at least one)."""
    no_match: list[str] = Field(default_factory=list)
    reason: str | None = None
    """Told to the model when a `deny` rule refuses a command."""


class _RulesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: list[_RuleSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    name: str
    verdict: Verdict
    program: str
    args: tuple[str, ...]
    reason: str | None = None

    def applies_to(self, command: SimpleCommand) -> bool:
        """Whether this rule speaks for `command` (see the module docstring for where)."""
        words = command.words
        if self.verdict == "auto":
            return (
                bool(words)
                and _program_matches(self.program, words[0], by_file_name=False)
                and _args_match(self.args, words[1:])
                and not _writes_files(command)
            )
        return any(
            _program_matches(self.program, word, by_file_name=True)
            and _args_match(self.args, words[index + 1 :])
            for index, word in enumerate(words)
        )

    def applies_to_line(self, line: str) -> bool:
        """Whether the rule applies to any simple command of `line` (for its examples)."""
        try:
            commands, _ = _all_commands(line, 0)
        except TooDeep:
            return False
        return any(self.applies_to(command) for command in commands)


@dataclass(frozen=True)
class RuleVerdict:
    verdict: Verdict
    why: str
    """The rule that decided, or why none did, in words."""
    rule: Rule | None = None


@dataclass(frozen=True)
class ApprovalRules:
    """The rules of one file, in file order."""

    rules: tuple[Rule, ...]
    source: str = "rules"

    def verdict(self, line: str, default: Verdict) -> RuleVerdict:
        """The strictest verdict of `line`'s parts; `default` for parts no rule speaks for."""
        try:
            commands, complete = _all_commands(line, 0)
        except TooDeep:
            return RuleVerdict("confirm", "it nests too deep to read")
        decided = [self._command_verdict(command, default) for command in commands]
        if not complete:
            decided.append(RuleVerdict("confirm", "a quote, substitution or heredoc is left open"))
        if not decided:
            return RuleVerdict(default, "it runs nothing")
        return max(decided, key=lambda verdict: _STRICTNESS[verdict.verdict])

    def _command_verdict(self, command: SimpleCommand, default: Verdict) -> RuleVerdict:
        if any(mark in command.words[0] for mark in "$`"):
            return RuleVerdict("confirm", f"its program is an expansion ({command.words[0]})")
        applying = [rule for rule in self.rules if rule.applies_to(command)]
        if not applying:
            return RuleVerdict(default, "no approval rule matches it")
        strictest = max(applying, key=lambda rule: _STRICTNESS[rule.verdict])
        return RuleVerdict(strictest.verdict, f"approval rule {strictest.name!r}", strictest)


def load_rules(path: Path) -> ApprovalRules:
    """Read and check a rules file; RulesError says what is wrong and where."""
    data = read_toml(path, "approval rules file", "check its path", RulesError)
    return parse_rules(data, str(path))


def read_toml(
    path: Path, what: str, if_missing: str, error: Callable[[str], Exception]
) -> dict[str, Any]:
    """The file's TOML (a rules file, a config file); `error` says, in words naming the
    file as `what`, why it cannot be read and what to do (`if_missing` when it is not there)."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist: {if_missing}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} {path} is not valid TOML ({exc}): fix its syntax") from None


def parse_rules(data: object, source: str) -> ApprovalRules:
    """Rules from parsed TOML; every rule's examples are checked."""
    try:
        spec = _RulesFile.model_validate(data)
    except ValidationError as exc:
        raise RulesError(f"approval rules {source}: {describe_invalid(exc, 'key')}") from None
    rules = tuple(
        Rule(each.name, each.verdict, each.program, tuple(each.args), each.reason)
        for each in spec.rule
    )
    problems = [
        problem
        for rule, each in zip(rules, spec.rule, strict=True)
        for problem in _example_problems(rule, each.match, each.no_match)
    ]
    names = [rule.name for rule in rules]
    problems += [
        f"two rules are named {name!r}" for name in sorted(set(names)) if names.count(name) > 1
    ]
    if problems:
        raise RulesError(f"approval rules {source}: {'; '.join(problems)}")
    return ApprovalRules(rules, source)


def _example_problems(rule: Rule, match: Sequence[str], no_match: Sequence[str]) -> list[str]:
    problems = [
        f"rule {rule.name!r} does not match its example {example!r}"
        for example in match
        if not rule.applies_to_line(example)
    ]
    problems += [
        f"rule {rule.name!r} matches {example!r}, which it lists under no_match"
        for example in no_match
        if rule.applies_to_line(example)
    ]
    return problems


class Verdicts(Protocol):
    """What decides a command by rules: a file's `ApprovalRules`, or a server's rule book,
    whose rules grow while runs go on."""

    def verdict(self, line: str, default: Verdict) -> RuleVerdict: ...


class RuledApprover:
    """Decides by the rules: `auto` runs, `deny` refuses with the rule's reason, `confirm`
    asks `asker` (a person at a terminal, or a server's client); with no one to ask, it is
    refused and the model is told why."""

    def __init__(self, rules: Verdicts, default: Verdict, asker: Approver | None) -> None:
        self._rules = rules
        self._default = default
        self._asker = asker

    async def decide(self, command: str) -> ApprovalDecision:
        decided = self._rules.verdict(command, self._default)
        if decided.verdict == "auto":
            return ApprovalDecision("auto", command, reason=decided.why)
        if decided.verdict == "deny":
            because = decided.rule.reason if decided.rule and decided.rule.reason else None
            reason = f"the approval rules refuse it ({decided.why})"
            return ApprovalDecision(
                "no", command, reason=f"{reason}: {because}" if because else reason
            )
        if self._asker is None:
            return ApprovalDecision(
                "no",
                command,
                reason=f"it needs a person's approval ({decided.why}) and this run has no one "
                "to ask",
            )
        return await self._asker.decide(command)


def approver_for(mode: ApprovalMode, rules: Verdicts | None, asker: Approver | None) -> Approver:
    """Who approves a run's commands in `mode`, under `rules` if any; `asker` answers what
    needs a person (None: nobody can be asked, so the rules' "confirm" refuses)."""
    if mode == "never-run":
        return NeverRunApprover()
    if rules is not None:
        return RuledApprover(rules, "confirm" if mode == "confirm" else "auto", asker)
    if asker is not None and mode == "confirm":
        return asker
    return AutoApprover()


def _all_commands(line: str, nesting: int) -> tuple[list[SimpleCommand], bool]:
    """The simple commands of `line` and of every script they hand to a shell, and whether
    the lexer read all of them to their ends. Raises TooDeep."""
    lexed = lex_script(line, nesting)
    commands, complete = [], lexed.complete
    for command in lexed.commands:
        commands.append(command)
        for script in embedded_scripts(command):
            inner, inner_complete = _all_commands(script, nesting + 1)
            commands += inner
            complete = complete and inner_complete
    return commands, complete


def _alternatives(pattern: str) -> list[str]:
    return pattern.split("|")


def _word_matches(pattern: str, word: str) -> bool:
    return any(fnmatch.fnmatchcase(word, each) for each in _alternatives(pattern))


def _program_matches(pattern: str, word: str, *, by_file_name: bool) -> bool:
    """A pattern with a `/` names one file; one without names a program found on PATH."""
    if by_file_name and "/" not in pattern:
        word = word.rsplit("/", 1)[-1]
    elif "/" in word and "/" not in pattern:
        return False
    return _word_matches(pattern, word)


def _args_match(patterns: Sequence[str], words: Sequence[str]) -> bool:
    """Word globs anchored at both ends; `**` takes any number of words.

    WHY a table rather than recursion: the model writes the words, and `**` tried at every
    split would take time exponential in the patterns.
    """
    # reachable[j]: the patterns so far can consume exactly words[:j].
    reachable = [True] + [False] * len(words)
    for pattern in patterns:
        if pattern == ANY_WORDS:
            for j in range(1, len(words) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [
                reachable[j] and _word_matches(pattern, words[j]) for j in range(len(words))
            ]
    return reachable[-1]


def _writes_files(command: SimpleCommand) -> bool:
    """Output redirected to a file (not /dev/null, not another descriptor)."""
    for operator, target in command.redirections:
        if operator in _WRITING_REDIRECTIONS and target not in _QUIET_TARGETS:
            return True
        if operator == ">&" and not (target.isdigit() or target == "-"):
            return True
    return False
