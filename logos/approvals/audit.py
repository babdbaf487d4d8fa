"""The audit log: every approval decision of every run, one JSON line each.

It lives at `$XDG_STATE_HOME/logos/audit.jsonl` (default `~/.local/state/logos/audit.jsonl`,
created 0600) and is only ever appended to, so it answers "what did the agent run on this
machine, and who allowed it" across runs, even when trajectories are deleted.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from logos.approvals.approval import ApprovalAction, ApprovalDecision
from logos.jsonl import JsonLinesFile, open_private_append


class AuditEntry(BaseModel):
    """One line of the audit log."""

    model_config = ConfigDict(frozen=True)

    time: str
    action: ApprovalAction
    command: str
    edited_command: str | None = None
    reason: str | None = None
    mode: str
    """The approval mode of the run: auto, confirm or never-run."""
    runner: str
    """Where commands ran: local or sandbox."""
    cwd: str
    trajectory: str | None
    pid: int


class AuditLog(JsonLinesFile):
    """Appends decisions to the audit log; open it before the run starts."""

    def __init__(self, path: Path, *, mode: str, runner: str, cwd: str, trajectory: str | None):
        super().__init__(path, open_private_append(path))
        self._mode = mode
        self._runner = runner
        self._cwd = cwd
        self.trajectory = trajectory
        """The trajectory of the run being audited, once it has one."""

    def record(self, decision: ApprovalDecision) -> None:
        entry = AuditEntry(
            **vars(decision),
            mode=self._mode,
            runner=self._runner,
            cwd=self._cwd,
            trajectory=self.trajectory,
            pid=os.getpid(),
        )
        self.write_line(entry.model_dump_json())
