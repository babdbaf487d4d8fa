"""The audit log: every approval decision of every run, one JSON line each.

It lives at `$XDG_STATE_HOME/logos/audit.jsonl` (default `~/.local/state/logos/audit.jsonl`,
created 0600) and is only ever appended to, so it answers "what did the agent run on this
machine, and who allowed it" across runs, even when trajectories are deleted.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Self

from pydantic import BaseModel, ConfigDict

from logos.cli.approval import ApprovalAction, ApprovalDecision
from logos.cli.paths import open_private_append, write_line


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


class AuditLog:
    """Appends decisions to the audit log; open it before the run starts."""

    def __init__(self, path: Path, *, mode: str, runner: str, cwd: str, trajectory: str | None):
        self.path = path
        self._fd = open_private_append(path)
        self._mode = mode
        self._runner = runner
        self._cwd = cwd
        self.trajectory = trajectory
        """The trajectory of the run being audited, once it has one."""

    def record(self, decision: ApprovalDecision) -> None:
        entry = AuditEntry(
            time=decision.time,
            action=decision.action,
            command=decision.command,
            edited_command=decision.edited_command,
            reason=decision.reason,
            mode=self._mode,
            runner=self._runner,
            cwd=self._cwd,
            trajectory=self.trajectory,
            pid=os.getpid(),
        )
        write_line(self._fd, entry.model_dump_json())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
