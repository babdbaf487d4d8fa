"""A project while the server runs: its turns, run in the server's task group, detached
from any request (`registry` makes, loads and changes projects).

Each project has one worker that takes the person's messages in order: a turn routes the
message to one agent, runs it, follows its handoff to the next within the same turn, and
ends when an agent answers the person, a guard or a budget holds it, or someone stops it.
A message sent while a turn runs is queued, injected into the running turn at its next
handoff, or interrupts it, as the project says; never refused. Everything is saved as it
changes (`store`), and a server that restarts mid-turn ends that turn with a note.
"""

from __future__ import annotations

import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from logos.approvals.approval import ApprovalDecision, Approver
from logos.approvals.rules import Verdicts, approver_for
from logos.errors import RecordFileError
from logos.providers.base import Usage
from logos.providers.pricing import estimate_cost
from logos.records.events import ConfirmRequiredEvent
from logos.serve.api import ApiError
from logos.serve.approvals import (
    KEPT_OUTCOMES,
    Approvals,
    RuleBook,
    RuleRefused,
    UnknownApproval,
    too_late,
)
from logos.serve.event_hub import EventLog, read_published
from logos.serve.filechanges.tracker import ChangeTrackers, TurnChanges, writable_roots
from logos.serve.projects import budget as budgets
from logos.serve.projects.briefing import Member, briefing
from logos.serve.projects.calls import CallOutcome, CallPlan, call_agent
from logos.serve.projects.context import context_for
from logos.serve.projects.directives import listens, without_marker
from logos.serve.projects.events import (
    AgentChanged,
    ApprovalAsked,
    ApprovalDecided,
    BudgetUpdate,
    ChatMessage,
    GuardTripped,
    MessageEnd,
    MessageStart,
    MessageStatus,
    ProjectChanged,
    Routing,
    TurnChanged,
    TurnState,
)
from logos.serve.projects.guards import TurnGuard
from logos.serve.projects.permissions import agent_ceiling
from logos.serve.projects.routing import Decision, route_handoff, route_user_message
from logos.serve.projects.states import agent_place, agent_state, project_state
from logos.serve.projects.store import ProjectStore
from logos.serve.projects.wire import (
    AgentRecord,
    ChatEntry,
    GuardAnswer,
    HeldHandoff,
    ProjectRecord,
    QueuedMessage,
    SavedApproval,
    Spend,
)
from logos.serve.sessions import new_id
from logos.serve.setup import ServerSetup

USER = "user"
LOGOS = "logos"
_ROSTER_CHANGES = {
    "created": "{agent} ({role}) joined the project",
    "removed": "{agent} left the project",
    "promoted": "{agent} is the captain now",
}
"""Changes of the team the agents are told of, in their context."""


@dataclass(frozen=True)
class Services:
    """What every project of a server shares."""

    setup: ServerSetup
    approvals: Approvals
    """The server's commands waiting for approval: a project's are listed with the runs'."""
    rules: Verdicts
    rule_book: RuleBook | None
    """Where "always allow commands like this" writes (None: nowhere)."""
    trackers: ChangeTrackers | None = None
    """Where each project's changed files are followed (None: they are not)."""

    def allow_like(self, command: str) -> None:
        if self.rule_book is None:
            raise ApiError(409, "this server keeps no approval rules file: add rules by hand")
        try:
            self.rule_book.allow_like(command)
        except RuleRefused as exc:
            raise ApiError(422, str(exc)) from None


@dataclass(frozen=True)
class _Call:
    agent: str
    message: str
    cancel: anyio.Event


@dataclass(frozen=True)
class _Reply:
    id: str
    text: str
    status: MessageStatus
    reason: str
    commands: tuple[str, ...]
    listening: bool


class Project:
    """One project while the server runs: its record, its log, its chat, its worker."""

    def __init__(
        self,
        record: ProjectRecord,
        store: ProjectStore,
        log: EventLog,
        chat: list[ChatEntry],
        services: Services,
    ) -> None:
        self.record = record
        self.log = log
        self.chat = chat
        self._store = store
        self._services = services
        self._wake = anyio.Event()
        self.call: _Call | None = None
        self.turn_stop: anyio.Event | None = None
        self.stop_reason = ""
        self.turn_spend = Spend()
        self.closing = False
        self.done = anyio.Event()
        self._changes: TurnChanges | None = None
        """What the running turn changed in the project's writable paths, followed."""
        self._asked: OrderedDict[str, None] = OrderedDict()
        """The ids of the questions this project asked lately (a late answer is told what
        became of one of them, never of another project's)."""

    # Saving and telling ----------------------------------------------------------------------

    def save(self) -> None:
        self._store.save(self.record)

    def publish(self, event: BaseModel) -> int:
        self.log.publish(event)
        seq = self.log.last_id
        entry = _chat_entry(seq, event)
        if entry is not None:
            self.chat.append(entry)
        return seq

    def note(self, text: str, to: str | None = None) -> None:
        self.publish(ChatMessage(id=new_id(), author=LOGOS, kind="note", text=text, to=to))

    def agent_changed(self, agent: AgentRecord, change: str) -> None:
        self.publish(
            AgentChanged(agent=agent.name, role=agent.role, status=agent.status, change=change)
        )

    def project_changed(self, change: str) -> None:
        record = self.record
        self.publish(
            ProjectChanged(
                change=change,
                name=record.name,
                goal=record.goal,
                progress=record.progress,
                paused=record.paused,
            )
        )

    def wake(self) -> None:
        self._wake.set()

    @property
    def busy(self) -> bool:
        return self.record.in_turn is not None

    def names(self) -> tuple[list[str], list[str]]:
        agents = [agent.name for agent in self.record.agents]
        available = [agent.name for agent in self.record.agents if agent.status != "stopped"]
        return agents, available

    # The person's actions --------------------------------------------------------------------

    def send(self, text: str) -> dict[str, Any]:
        """Put the person's message in the chat; it is answered in its turn."""
        message = QueuedMessage(id=new_id(), text=text)
        seq = self.publish(ChatMessage(id=message.id, author=USER, kind="user", text=text))
        record = self.record
        if record.held is not None:
            self.note(
                f"the handoff {record.held.source} → {record.held.target} that waited for you "
                "is dropped: your message goes first"
            )
            record.held = None
        mode = record.double_texting
        state = "queued"
        if self.busy and mode == "inject":
            state = "injected"
            self.note("a turn is running: your message reaches its next agent at the handoff")
            record.injected.append(message)
        elif self.busy and mode == "interrupt":
            state = "interrupting"
            record.queue.insert(0, message)
            self.stop_turn("interrupted by a new message from the person")
        else:
            record.queue.append(message)
            if self.busy or record.paused:
                ahead = len(record.queue) - 1 + (1 if self.busy else 0)
                why = "the project is paused" if record.paused else "a turn is running"
                self.note(f"{why}: your message is queued ({ahead} ahead of it)")
        self.save()
        self.wake()
        return {"message": message.id, "seq": seq, "state": state}

    def stop_turn(self, reason: str) -> bool:
        if self.turn_stop is None:
            return False
        self.stop_reason = reason
        self.turn_stop.set()
        if self.call is not None:
            self.call.cancel.set()
        return True

    def pause(self, paused: bool) -> None:
        if self.record.paused == paused:
            return
        self.record.paused = paused
        self.save()
        self.project_changed("paused" if paused else "resumed")
        self.wake()

    def answer_guard(self, answer: GuardAnswer) -> None:
        record = self.record
        held = record.held
        if held is None:
            raise ApiError(409, "no handoff waits for you: nothing to continue, stop or pick")
        if answer.action == "stop":
            record.held = None
            self.note(f"you stopped the handoff {held.source} → {held.target}: the turn ended")
        else:
            target = held.target if answer.action == "continue" else answer.agent
            agent = record.agent(target or "")
            if agent is None or agent.status == "stopped":
                raise ApiError(
                    422,
                    f"{target!r} is no agent that can answer (agents: "
                    f"{', '.join(self.names()[1]) or 'none'}): pick one of them",
                )
            record.held = None
            why = (
                f"the person let {held.source}'s handoff go on"
                if answer.action == "continue"
                else f"the person picked {agent.name} to go on from {held.source}'s reply"
            )
            record.queue.insert(0, QueuedMessage(id=new_id(), text="", to=agent.name, why=why))
        self.save()
        self.wake()

    # The worker ------------------------------------------------------------------------------

    async def work(self) -> None:
        try:
            while not self.closing:
                record = self.record
                if record.paused or not record.queue:
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    continue
                message = record.queue.pop(0)
                try:
                    await self._turn(message)
                except Exception:  # WHY: a bug ends its turn (said in the chat), not the server
                    traceback.print_exc(file=sys.stderr)
        finally:
            self.done.set()

    async def _turn(self, message: QueuedMessage) -> None:
        record = self.record
        record.in_turn = message
        self.turn_spend = Spend()
        self.turn_stop = anyio.Event()
        self.stop_reason = ""
        self.save()
        self.publish(TurnChanged(message=message.id, state="started"))
        state: TurnState = "failed"
        reason = "a bug in logos serve ended the turn"
        try:
            self._changes = await self._follow_changes()
            state, reason = await self._run_turn(message)
            if self._changes is not None:
                start = self._changes.start
                await self._changes.step("turn", message.id, message=message.id, since=start)
        finally:
            self.publish(TurnChanged(message=message.id, state=state, reason=reason))
            self._requeue_injected()
            record.in_turn = None
            self.turn_stop = None
            self.save()

    def _requeue_injected(self) -> None:
        """The messages sent into a turn that no agent read go first in the queue."""
        record = self.record
        record.queue[0:0] = [m for m in record.injected if not self._seen_by_any(m.id)]
        record.injected = []

    def _seen_by_any(self, message_id: str) -> bool:
        entry = next((e for e in self.chat if e.id == message_id), None)
        return entry is not None and any(a.seen >= entry.seq for a in self.record.agents)

    async def _run_turn(self, message: QueuedMessage) -> tuple[TurnState, str]:
        record = self.record
        agents, available = self.names()
        if message.to is not None and message.to in available:
            decision = Decision(message.to, message.why or "")
        else:
            if message.to is not None:
                self.note(f"{message.to} cannot answer now (stopped or removed): routed anew")
            decision = route_user_message(
                message.text,
                agents=agents,
                available=available,
                captain=record.captain.name if record.captain else None,
                listening=record.listening,
            )
        record.listening = None
        for note in decision.notes:
            self.note(note)
        self.publish(Routing(message=message.id, agent=decision.agent, reason=decision.reason))
        if decision.agent is None:
            return "no-agent", decision.reason
        guard = TurnGuard(record.max_hops, record.max_rounds)
        target, answering, why = decision.agent, message.id, decision.reason
        while True:
            assert self.turn_stop is not None
            if self.turn_stop.is_set():
                return "stopped", self.stop_reason
            if record.paused:
                return "stopped", "the project was paused"
            allowance = budgets.allowance(record.budget, record.spent, self.turn_spend)
            if allowance.exhausted is not None:
                why_spent = budgets.level_spent(record.budget, record.spent, self.turn_spend)
                self.note(f"{why_spent}: {target} was not called; raise the budget to go on")
                return "budget", why_spent
            agent = record.agent(target)
            if agent is None:
                self.note(f"{target} was removed: the turn ends here")
                return "stopped", f"{target} was removed"
            guard.answered(target)
            reply = await self._call(agent, answering, why, allowance)
            if self.turn_stop.is_set():
                return "stopped", self.stop_reason
            if reply.status != "complete":
                return ("failed" if reply.status == "failed" else "stopped"), reply.reason
            if reply.listening:
                record.listening = target
                return "answered", f"{target} asked you and listens for your next message"
            repeated = guard.reply(target, reply.text, bool(reply.commands))
            agents, available = self.names()
            handoff = route_handoff(target, reply.text, agents=agents, available=available)
            for note in handoff.notes:
                self.note(note)
            if handoff.agent is None:
                return "answered", handoff.reason
            tripped = repeated or guard.handoff(target, handoff.agent)
            if tripped is not None:
                record.held = HeldHandoff(
                    source=target, target=handoff.agent, text=reply.text, why=handoff.reason
                )
                self.save()
                self.publish(
                    GuardTripped(
                        message=reply.id, reason=tripped, source=target, target=handoff.agent
                    )
                )
                self.note(
                    f"{tripped}. Continue (let {handoff.agent} answer), stop, or pick an agent "
                    "to go on"
                )
                return "held", tripped
            self.publish(Routing(message=reply.id, agent=handoff.agent, reason=handoff.reason))
            target, answering, why = handoff.agent, reply.id, handoff.reason

    async def _call(
        self, agent: AgentRecord, answering: str, why: str, allowance: budgets.Allowance
    ) -> _Reply:
        record = self.record
        reply_id = new_id()
        cancel = anyio.Event()
        self.call = _Call(agent.name, reply_id, cancel)
        agent.status = "busy"
        self.agent_changed(agent, "busy")
        parts = []
        leave_out = {agent.name} if agent.briefed else {agent.name, LOGOS}
        if not agent.briefed:
            text = self._briefing(agent)
            self.publish(
                ChatMessage(id=new_id(), author=LOGOS, kind="briefing", text=text, to=agent.name)
            )
            parts.append(text)
            agent.briefed = True
        upto = self.log.last_id
        context, _ = context_for(
            leave_out, self.chat, since=agent.seen, upto=upto, max_tokens=record.context_tokens
        )
        if context:
            parts.append("What was said in the project's chat since your last turn:\n" + context)
        parts.append(f"It is your turn: {why}.")
        agent.seen = upto
        self.save()
        self.publish(MessageStart(id=reply_id, author=agent.name, answering=answering))
        plan = CallPlan(
            project_id=record.id,
            agent=agent,
            ceiling=agent_ceiling(record.allowed_paths, agent),
            message_id=reply_id,
            prompt="\n\n".join(parts),
            allowance=allowance,
            session_path=self._store.session_path(record.id, agent.name),
            cancel=cancel,
        )
        outcome: CallOutcome | None = None
        problem = ""
        try:
            outcome = await call_agent(
                self._services.setup,
                plan,
                lambda observer: self._approver(agent, reply_id, observer.pending),
                self.publish,
                self._live_spend(agent),
            )
        except (RecordFileError, ValueError, OSError) as exc:
            problem = str(exc)
        finally:
            self.call = None
        if self._changes is not None:
            await self._changes.step("reply", reply_id, message=reply_id)
        return self._ended(agent, reply_id, outcome, problem)

    async def _follow_changes(self) -> TurnChanges | None:
        """Snapshot the paths the project's agents may write as a turn starts (each reply
        and the turn then publish what they changed); None when nothing is followed."""
        trackers = self._services.trackers
        if trackers is None:
            return None
        record = self.record
        paths = [(p.path, p.read_only) for p in record.allowed_paths]
        paths += [(p.path, p.read_only) for a in record.agents for p in a.allowed_paths]
        roots = writable_roots(paths)
        tracker = trackers.get(record.id)
        if tracker is None or tracker.roots != roots:
            trackers.remove(record.id)
            tracker = trackers.open(record.id, roots)
        changes = TurnChanges(tracker, self.publish)
        await changes.begin()
        return changes

    def _live_spend(self, agent: AgentRecord) -> Callable[[Usage], None]:
        """Publish the spend with what the running call used so far (it is charged for good
        as the call ends)."""
        template = self._services.setup.template
        live = Spend()

        def used(usage: Usage) -> None:
            cost = estimate_cost(template.model_name, usage, template.prices)
            budgets.add(live, usage.total_input_tokens + usage.output_tokens, cost, 0.0)
            self.publish(
                BudgetUpdate(
                    project=budgets.plus(self.record.spent, live),
                    turn=budgets.plus(self.turn_spend, live),
                    agent=agent.name,
                    agent_spent=budgets.plus(agent.spent, live),
                    live=True,
                )
            )

        return used

    def _ended(
        self, agent: AgentRecord, reply_id: str, outcome: CallOutcome | None, problem: str
    ) -> _Reply:
        status: MessageStatus = "complete"
        reason = ""
        text = ""
        commands: tuple[str, ...] = ()
        tokens = 0
        cost: float | None = 0.0
        wall = 0.0
        if outcome is None:
            status, reason = "failed", problem or "the call ended before it started"
        else:
            summary = outcome.summary
            tokens = summary.usage.total_input_tokens + summary.usage.output_tokens
            cost, wall = summary.cost_usd, summary.wall_s
            commands = outcome.commands
            text = summary.response if summary.stop_reason == "final" else outcome.prose
            if summary.stop_reason == "canceled":
                status, reason = "stopped", self.stop_reason or "stopped"
            elif summary.stop_reason == "error":
                status, reason = "failed", summary.error or "the model failed"
            elif summary.stop_reason != "final":
                status, reason = "cut", summary.stop_reason
        listening = status == "complete" and listens(text)
        shown = without_marker(text)
        self.publish(
            MessageEnd(
                id=reply_id,
                author=agent.name,
                text=shown,
                status=status,
                reason=reason,
                commands=list(commands),
                tokens=tokens,
                cost_usd=cost,
                listening=listening,
            )
        )
        for spend in (self.record.spent, self.turn_spend, agent.spent):
            budgets.add(spend, tokens, cost, wall)
        if agent.status == "busy":
            agent.status = "idle"
        if self.record.agent(agent.name) is agent:
            self.agent_changed(agent, agent.status)
        self.publish(
            BudgetUpdate(
                project=self.record.spent,
                turn=self.turn_spend,
                agent=agent.name,
                agent_spent=agent.spent,
            )
        )
        self.save()
        return _Reply(reply_id, shown, status, reason, commands, listening)

    def _briefing(self, agent: AgentRecord) -> str:
        record = self.record
        return briefing(
            agent.role,
            templates=record.briefings,
            project=record.name,
            goal=record.goal,
            description=record.description,
            name=agent.name,
            roster=[Member(a.name, a.role) for a in record.agents],
        )

    # Approvals -------------------------------------------------------------------------------

    def _approver(self, agent: AgentRecord, message: str, pending: dict[str, str]) -> Approver:
        services = self._services
        key = f"{self.record.id}/{agent.name}"

        def announce(event: ConfirmRequiredEvent) -> None:
            pending[event.command] = event.id
            self._asked[event.id] = None
            while len(self._asked) > KEPT_OUTCOMES:
                self._asked.popitem(last=False)
            saved = SavedApproval(
                id=event.id,
                agent=agent.name,
                command=event.command,
                summary=event.summary,
                message=message,
            )
            self.record.approvals.append(saved)
            self.save()
            self.publish(ApprovalAsked.of(saved, event.expires_at))

        project = self

        class _Asker:
            async def decide(self, command: str) -> ApprovalDecision:
                try:
                    return await services.approvals.wait(key, command, announce)
                finally:
                    # WHY not as the server stops: the question is asked again after it starts
                    if not project.closing:
                        project.record.approvals = [
                            a
                            for a in project.record.approvals
                            if not (a.agent == agent.name and a.command == command and a.live)
                        ]
                        project.save()

        return approver_for(agent.approval, services.rules, _Asker())

    def decide(self, approval_id: str, approve: bool, reason: str | None, always: bool) -> str:
        approvals = self._services.approvals
        saved = next((a for a in self.record.approvals if a.id == approval_id), None)
        if saved is None:
            outcome = approvals.outcome(approval_id) if approval_id in self._asked else None
            raise ApiError(*too_late(approval_id, outcome, approvals.ttl_s))
        if always and approve:
            self._services.allow_like(saved.command)
        if saved.live:
            try:
                approvals.decide(approval_id, approve, reason)
            except UnknownApproval as exc:
                raise ApiError(*too_late(approval_id, exc.outcome, approvals.ttl_s)) from None
            return saved.agent
        # Saved before a restart: the agent's call is gone; tell it, in a turn of its own.
        self.record.approvals.remove(saved)
        self.publish(
            ApprovalDecided(
                id=saved.id,
                agent=saved.agent,
                message=saved.message,
                action="yes" if approve else "no",
                command=saved.command,
                reason=reason,
            )
        )
        if approve:
            self.record.queue.append(
                QueuedMessage(
                    id=new_id(),
                    text="",
                    to=saved.agent,
                    why=(
                        f"the person approved your command `{saved.summary}`, which waited when "
                        "the server restarted: run it again if it is still needed"
                    ),
                )
            )
        else:
            self.note(f"you denied {saved.agent}'s command `{saved.summary}`", to=saved.agent)
        self.save()
        self.wake()
        return saved.agent

    # Restart ---------------------------------------------------------------------------------

    def recover(self) -> None:
        """After a restart: end the turn that was running, with a note; keep its message."""
        record = self.record
        for agent in record.agents:
            if agent.status == "busy":
                agent.status = "idle"
                self.agent_changed(agent, "idle")
        self._requeue_injected()
        if record.in_turn is not None:
            message = record.in_turn
            record.in_turn = None
            self.note(
                "the server stopped during this turn: it ended there, and what was done is "
                "kept; send your message again (or a new one) to go on"
            )
            self.publish(
                TurnChanged(
                    message=message.id,
                    state="interrupted",
                    reason="the server stopped during the turn",
                )
            )
        for saved in record.approvals:
            if saved.live:
                saved.live = False
                self.publish(ApprovalAsked.of(saved))
        self.save()

    def status(self) -> dict[str, Any]:
        record = self.record
        return {
            "id": record.id,
            "name": record.name,
            "goal": record.goal,
            "description": record.description,
            "progress": record.progress,
            "status": project_state(record, self.busy),
            "double_texting": record.double_texting,
            "budget": record.budget.model_dump(),
            "spent": record.spent.model_dump(),
            "allowed_paths": [p.model_dump() for p in record.allowed_paths],
            "allowed_hosts": record.allowed_hosts,
            "agents": [self.agent_status(a) for a in record.agents],
            "queue": len(record.queue),
            "listening": record.listening,
            "held": record.held.model_dump() if record.held else None,
            "approvals": [a.model_dump() for a in record.approvals],
            "events": self.log.last_id,
            "created_at": record.created_at,
        }

    def agent_status(self, agent: AgentRecord) -> dict[str, Any]:
        return agent_status(agent, self.record, self._services.setup.model.model)


def agent_status(agent: AgentRecord, record: ProjectRecord, model: str) -> dict[str, Any]:
    return {
        "name": agent.name,
        "role": agent.role,
        "status": agent.status,
        "state": agent_state(agent, record),  # WHY beside status: waiting is no saved status
        "model": model,
        "where": agent_place(agent),
        "runner": agent.runner_kind,
        "approval": agent.approval,
        "allowed_paths": [p.model_dump() for p in agent.allowed_paths],
        "allowed_hosts": agent.allowed_hosts,
        "granted": agent.granted,
        "spent": agent.spent.model_dump(),
    }


def _chat_entry(seq: int, event: BaseModel) -> ChatEntry | None:
    """What the agents are told of event `seq`: the person's messages, the agents' replies
    and changes of the team; None for the rest."""
    if isinstance(event, ChatMessage) and event.kind == "user":
        return ChatEntry(seq=seq, id=event.id, author=event.author, text=event.text)
    if isinstance(event, MessageEnd):
        return ChatEntry(
            seq=seq, id=event.id, author=event.author, text=event.text, commands=event.commands
        )
    if isinstance(event, AgentChanged) and event.change in _ROSTER_CHANGES:
        said = _ROSTER_CHANGES[event.change].format(agent=event.agent, role=event.role)
        return ChatEntry(seq=seq, id=f"agent-{seq}", author=LOGOS, text=said)
    return None


def read_chat(path: Path) -> list[ChatEntry]:
    """The chat as the agents are told it, from the project's event log (a line that is
    no such event, say from a newer logos, is passed over)."""
    kinds: dict[str, type[BaseModel]] = {
        "message": ChatMessage,
        "message_end": MessageEnd,
        "agent": AgentChanged,
    }
    chat = []
    for event in read_published(path, 0):
        kind = kinds.get(event.type)
        if kind is None:
            continue
        try:
            entry = _chat_entry(event.id, kind.model_validate_json(event.data))
        except ValidationError:
            continue
        if entry is not None:
            chat.append(entry)
    return chat
