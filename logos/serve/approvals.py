"""Approvals out of band: a command that needs one waits, while the other blocks of its
turn go on, until a client approves or denies it, or its time runs out.

Each waiting command is a `Pending` with an id; the run announces it (`confirm_required`),
`POST /v1/approvals/{id}` decides it and `GET /v1/approvals` lists them across runs. One
that nobody answers within the TTL is denied with the reason "expired". What is decided
goes through the run's `ApprovalRunner` like any decision: to the audit log, the session
and the event stream.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import tomllib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

import anyio

from logos.approvals.approval import ApprovalAction, ApprovalDecision
from logos.approvals.rules import (
    ANY_WORDS,
    ApprovalRules,
    Rule,
    RulesError,
    RuleVerdict,
    Verdict,
    load_rules,
    parse_rules,
)
from logos.approvals.shell_lexer import embedded_scripts, lex_script
from logos.jsonl import replace_private_file, utc_now
from logos.protocol.envelope import command_preview
from logos.records.events import ConfirmRequiredEvent

_EXPIRED = "expired"
KEPT_OUTCOMES = 1000
"""Answered questions whose outcome is remembered, to tell a late answer what happened."""

Outcome: TypeAlias = Literal["approved", "denied", "expired", "ended"]


class UnknownApproval(KeyError):
    """No command waits under that id: decided already, expired, or never asked."""

    def __init__(self, approval_id: str, outcome: Outcome | None = None) -> None:
        super().__init__(approval_id)
        self.outcome = outcome
        """What became of it, when it was asked lately; None: never asked (or long ago)."""


def too_late(approval_id: str, outcome: Outcome | None, ttl_s: float) -> tuple[int, str]:
    """The status and the words of an answer to a question no longer open: what happened
    to it, as the person who clicked needs to hear it."""
    said: dict[Outcome, str] = {
        "approved": "this command was approved already (from another page, the terminal or "
        "the API): it ran or is running",
        "denied": "this command was denied already (from another page, the terminal or the "
        "API): it did not run",
        "expired": f"nobody answered within {ttl_s:g} s, so this command was denied as expired "
        "and the model was told",
        "ended": "the run or the agent's turn ended before anyone answered: the command did "
        "not run",
    }
    if outcome is None:
        return 404, (
            f"no command waits for approval {approval_id[:40]!r}: it was decided already, it "
            "expired, its run ended, or it never existed (GET /v1/approvals lists them)"
        )
    return 409, said[outcome]


@dataclass
class Pending:
    id: str
    run_id: str
    command: str
    summary: str
    created_at: str
    expires_at: str
    decided: anyio.Event = field(default_factory=anyio.Event)
    decision: ApprovalDecision | None = None


class Approvals:
    """Every command waiting for approval, across runs."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._pending: dict[str, Pending] = {}
        self._outcomes: OrderedDict[str, Outcome] = OrderedDict()

    def pending(self, run_id: str | None = None) -> list[Pending]:
        """Oldest first; those of one run when `run_id` is given."""
        return [p for p in self._pending.values() if run_id is None or p.run_id == run_id]

    def decide(self, approval_id: str, approve: bool, reason: str | None) -> Pending:
        pending = self._pending.pop(approval_id, None)
        if pending is None:
            raise UnknownApproval(approval_id, self._outcomes.get(approval_id))
        action: ApprovalAction = "yes" if approve else "no"
        pending.decision = ApprovalDecision(action, pending.command, reason=reason)
        pending.decided.set()
        self._remember(approval_id, "approved" if approve else "denied")
        return pending

    def outcome(self, approval_id: str) -> Outcome | None:
        """What became of a question asked lately (None: unknown, or still open)."""
        return self._outcomes.get(approval_id)

    def _remember(self, approval_id: str, outcome: Outcome) -> None:
        self._outcomes[approval_id] = outcome
        while len(self._outcomes) > KEPT_OUTCOMES:
            self._outcomes.popitem(last=False)

    def approver_for(
        self, run_id: str, announce: Callable[[ConfirmRequiredEvent], None]
    ) -> ServerApprover:
        return ServerApprover(self, run_id, announce)

    async def wait(
        self, run_id: str, command: str, announce: Callable[[ConfirmRequiredEvent], None]
    ) -> ApprovalDecision:
        now = dt.datetime.now(dt.UTC)
        pending = Pending(
            id=secrets.token_hex(8),
            run_id=run_id,
            command=command,
            summary=command_preview(command),
            created_at=utc_now(),
            expires_at=_timestamp(now + dt.timedelta(seconds=self.ttl_s)),
        )
        self._pending[pending.id] = pending
        timed_out = False
        try:
            announce(
                ConfirmRequiredEvent(
                    id=pending.id,
                    command=command,
                    summary=pending.summary,
                    expires_at=pending.expires_at,
                )
            )
            with anyio.move_on_after(self.ttl_s) as waiting:
                await pending.decided.wait()
            timed_out = waiting.cancelled_caught
        finally:
            # WHY also on cancel: a canceled run's question must leave the list.
            if self._pending.pop(pending.id, None) is not None:
                self._remember(pending.id, "expired" if timed_out else "ended")
        return pending.decision or ApprovalDecision("no", command, reason=_EXPIRED)


class ServerApprover:
    """The `Approver` of one run: asks the server's clients, and waits."""

    def __init__(
        self,
        approvals: Approvals,
        run_id: str,
        announce: Callable[[ConfirmRequiredEvent], None],
    ) -> None:
        self._approvals = approvals
        self._run_id = run_id
        self._announce = announce

    async def decide(self, command: str) -> ApprovalDecision:
        return await self._approvals.wait(self._run_id, command, self._announce)


def _timestamp(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RuleRefused(ValueError):
    """No approval rule can be written for that command: the message says why."""


_PAGE_RULE_PREFIX = "allowed from the page: "
_GLOB_MARKS = frozenset("*?[]|")


class RuleBook:
    """The approval rules the server follows, and the file its page adds rules to.

    WHY one object for all runs: a rule added from the page ("always allow commands like
    this") must hold for every command asked about afterwards, in the runs going now as in
    later ones; `rules` is what the runs are given, and it follows the book.
    """

    def __init__(
        self, loaded: ApprovalRules | None, path: Path, problem: str | None = None
    ) -> None:
        self.path = path
        """The file new rules are appended to (the configured rules file, else the server's
        own)."""
        self.problem = problem
        """Why the file cannot be used (then no rule is added to it)."""
        self.current = loaded or ApprovalRules(())

    @classmethod
    def open(cls, configured: ApprovalRules | None, own_file: Path) -> RuleBook:
        """The configured rules file when there is one; else the server's own file, read
        when it exists (a damaged one is left alone and named in `problem`)."""
        if configured is not None:
            return cls(configured, Path(configured.source))
        if not own_file.exists():
            return cls(None, own_file)
        try:
            return cls(load_rules(own_file), own_file)
        except RulesError as exc:
            return cls(None, own_file, f"{exc}: fix or delete it, then restart the server")

    def verdict(self, line: str, default: Verdict) -> RuleVerdict:
        """By the book's rules as they are when the command is asked about (`Verdicts`), so
        a rule added from the page applies to the runs already going on."""
        return self.current.verdict(line, default)

    def allow_like(self, command: str) -> Rule:
        """Add (or find) the `auto` rule for commands like `command`: its program and
        subcommand with any arguments after (`git status **`), or else this program with
        these very arguments. RuleRefused when it is not one simple command a rule can
        name."""
        if self.problem is not None:
            raise RuleRefused(self.problem)
        program, args = _rule_words(command)
        name = _PAGE_RULE_PREFIX + " ".join([program, *args])
        known = next((rule for rule in self.current.rules if rule.name == name), None)
        if known is not None:
            return known
        block = (
            "\n[[rule]]\n"
            f"name = {_toml_string(name)}\n"
            'verdict = "auto"\n'
            f"program = {_toml_string(program)}\n"
            f"args = [{', '.join(_toml_string(arg) for arg in args)}]\n"
            f"match = [{_toml_string(command)}]\n"
        )
        try:
            old = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            old = "# Approval rules added from the logos page (see the README's approval rules).\n"
        text = old + ("" if old.endswith("\n") or not old else "\n") + block
        try:
            updated = parse_rules(tomllib.loads(text), str(self.path))
        except (tomllib.TOMLDecodeError, RulesError) as exc:
            raise RuleRefused(
                f"a rule for {command_preview(command)!r} would not hold ({exc}): write one "
                f"by hand in {self.path}"
            ) from None
        replace_private_file(self.path, text)
        self.current = updated
        return updated.rules[-1]


def _rule_words(command: str) -> tuple[str, list[str]]:
    """The rule's program and args for `command` (see `RuleBook.allow_like`)."""
    lexed = lex_script(command)
    if not lexed.complete or len(lexed.commands) != 1 or embedded_scripts(lexed.commands[0]):
        raise RuleRefused(
            "only a single simple command (no pipes, `;`, `&&`, substitutions or scripts) can "
            "be allowed from the page: approve this one, or write a rule by hand"
        )
    words = lexed.commands[0].words
    program = words[0] if words else ""
    if (
        not program
        or "/" in program
        or any(mark in program for mark in "$`=")
        or (_GLOB_MARKS & set(program))
    ):
        raise RuleRefused(
            f"{program!r} is not a program found by name: approve this one, or write a rule by hand"
        )
    first = words[1] if len(words) > 1 else ""
    if first.replace("-", "").replace("_", "").isalnum() and not first.startswith("-"):
        return program, [first, ANY_WORDS]  # a subcommand (`git status`): any arguments after
    # WHY exact otherwise: `rm -rf build` allowed must not allow `rm -rf` of anything else.
    if any("|" in word for word in words[1:]):
        raise RuleRefused(
            "a rule cannot name an argument holding `|`: approve this one, or write a rule by hand"
        )
    return program, [_literal(word) for word in words[1:]]


def _literal(word: str) -> str:
    """A pattern matching `word` alone (its `*`, `?` and `[` taken as themselves)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in word)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, characters past U+FFFF stay literal
    (JSON's surrogate pairs are no TOML), and DEL, which TOML refuses raw, is escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
