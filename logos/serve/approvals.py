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
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from logos.approvals.approval import ApprovalAction, ApprovalDecision
from logos.jsonl import utc_now
from logos.protocol.envelope import command_preview
from logos.records.events import ConfirmRequiredEvent

EXPIRED = "expired"


class UnknownApproval(KeyError):
    """No command waits under that id: decided already, expired, or never asked."""


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

    def pending(self, run_id: str | None = None) -> list[Pending]:
        """Oldest first; those of one run when `run_id` is given."""
        return [p for p in self._pending.values() if run_id is None or p.run_id == run_id]

    def decide(self, approval_id: str, approve: bool, reason: str | None) -> Pending:
        pending = self._pending.pop(approval_id, None)
        if pending is None:
            raise UnknownApproval(approval_id)
        action: ApprovalAction = "yes" if approve else "no"
        pending.decision = ApprovalDecision(action, pending.command, reason=reason)
        pending.decided.set()
        return pending

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
        try:
            announce(
                ConfirmRequiredEvent(
                    id=pending.id,
                    command=command,
                    summary=pending.summary,
                    expires_at=pending.expires_at,
                )
            )
            with anyio.move_on_after(self.ttl_s):
                await pending.decided.wait()
        finally:
            # WHY also on cancel: a canceled run's question must leave the list.
            self._pending.pop(pending.id, None)
        return pending.decision or ApprovalDecision("no", command, reason=EXPIRED)


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
