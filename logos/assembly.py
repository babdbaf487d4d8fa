"""One run put together the same way under every front.

The `logos` command (and `logos mcp` through it), `logos serve`'s runs, a project's agents
and `logos batch`'s tasks all run the agent loop alike: open the run's runner, its audit log
and its trajectory; record the run as it goes (`RunRecorder`); put the approval wrapper in
front of the runner; announce the start; run the loop; record how it ended; close it all.
`RunAssembly` is that sequence, written once, so that a front states only what is its own
(`RunParts`): where the events go, who approves, how the trajectory is named or continued,
whether the runner and the provider are closed after, and what sets the cancel event.

Every path closes what was opened. A part that fails to open closes those opened before it.
A run that ends, fails or is cancelled (by the loop's cancel event, or under it by an anyio
cancel scope) closes its runner first (shielded and bounded: `close_bounded`), then records
the summary of what it spent, then closes its files.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from logos.agent.config import Callbacks, Config
from logos.agent.loop import run as run_loop
from logos.agent.steps import RunResult
from logos.approvals.approval import ApprovalMode, ApprovalRunner, Approver
from logos.approvals.audit import AuditLog
from logos.closing import AsyncCloseable, close_bounded
from logos.providers.base import Message
from logos.records.events import RunObserver, RunSummary, StartEvent
from logos.records.recorder import RunRecorder
from logos.records.trajectory import TrajectoryWriter
from logos.runners.base import Runner

__all__ = ["Approval", "RunAssembly", "RunParts"]


@dataclass(frozen=True)
class Approval:
    """Who approves a run's commands, and the audit log each decision is appended to."""

    mode: ApprovalMode
    approver: Approver
    audit_log: Path


@dataclass(frozen=True)
class RunParts:
    """What a front decides about one run; the rest is the same under every front."""

    config: Config
    """The loop's settings; its runner is replaced by the one the assembly opens."""
    prompt: str
    history: Sequence[Message]
    open_runner: Callable[[], Runner]
    """Opens the run's runner: the first part opened."""
    open_trajectory: Callable[[], TrajectoryWriter]
    """Opens the trajectory: a new file the front names, or a recorded run continued."""
    observer: RunObserver
    """Where the run's events go: a display, a server's event log, a project's chat."""
    approval: Approval | None
    """None: the commands run as the model wrote them (a batch task's, in its own
    workspace), so nothing is asked or audited."""
    runner_kind: str
    """Where the commands run, as the start event and the audit log name it: local, sandbox."""
    cwd: str
    closes_runner: bool = True
    """False: the runner is its caller's, who goes on using it and closes it (a batch task
    runs its check on it after the agent's run)."""
    closes_provider: bool = False
    """The run's end closes the provider too (the command's one run); a server's provider
    serves its next run."""
    watch: Callable[[Callbacks], Callbacks] | None = None
    """More callbacks around the recorder's (what each turn changed, for a server's page);
    the recorder's are always called first."""


class RunAssembly(AsyncCloseable):
    """A run whose parts are open (`open`): `run` runs it and closes them all; `aclose`
    closes a run that will not be run."""

    def __init__(
        self, parts: RunParts, runner: Runner, audit: AuditLog | None, writer: TrajectoryWriter
    ) -> None:
        """Takes the parts `open` opened; call `open`, not this."""
        self._parts = parts
        self._runner = runner
        self._audit = audit
        self._writer = writer
        self._recorder = RunRecorder(writer, audit, parts.observer, model=parts.config.model_name)
        approval = parts.approval
        self._gated: Runner = (
            runner
            if approval is None
            else ApprovalRunner(runner, approval.approver, self._recorder.decided)
        )
        self._closed = False
        self.summary: RunSummary | None = None
        """How the run ended, once recorded: also when a cancellation ended it."""

    @classmethod
    async def open(cls, parts: RunParts) -> RunAssembly:
        """Open the runner, then the audit log, then the trajectory (a run that cannot be
        audited must not leave a trajectory). A part that fails raises what it raised, and
        what was opened before it is closed (the provider too, when the run owns it)."""
        owned = [parts.config.provider.aclose] if parts.closes_provider else []
        audit: AuditLog | None = None
        try:
            runner = parts.open_runner()
            if parts.closes_runner:
                owned.insert(0, runner.aclose)
            approval = parts.approval
            if approval is not None:
                audit = AuditLog(
                    approval.audit_log,
                    mode=approval.mode,
                    runner=parts.runner_kind,
                    cwd=parts.cwd,
                    trajectory=None,
                )
            writer = parts.open_trajectory()
        except BaseException:
            if audit is not None:
                audit.close()
            await close_bounded(*owned)
            raise
        if audit is not None:
            audit.trajectory = str(writer.path)
        return cls(parts, runner, audit, writer)

    @property
    def trajectory(self) -> Path:
        return self._writer.path

    async def run(self, cancel: anyio.Event | None = None) -> RunSummary:
        """Write the prompt, announce the run, run the loop, then close the runner and
        record how the run ended, however it ended; setting `cancel` stops it.

        Cancelled under it (an anyio cancel scope), it records the summary of what its
        recorded steps spent ("canceled") and lets the cancellation through; when the loop
        raises, the summary says "error" with what was raised. `summary` holds it either way.
        """
        if self._closed:
            raise RuntimeError("this run was run or closed already: open another")
        parts = self._parts
        recorder = self._recorder
        result: RunResult | None = None
        failure: Exception | None = None
        started = time.monotonic()
        try:
            # WHY the prompt here, not at open: a run that never starts leaves no prompt.
            self._writer.prompt(parts.prompt)
            parts.observer.start(
                StartEvent(
                    provider=parts.config.provider.name,
                    model=parts.config.model_name,
                    runner=parts.runner_kind,
                    approval="auto" if parts.approval is None else parts.approval.mode,
                    cwd=parts.cwd,
                    trajectory=recorder.trajectory,
                )
            )
            config = dataclasses.replace(parts.config, runner=self._gated)
            callbacks = recorder.callbacks()
            if parts.watch is not None:
                callbacks = parts.watch(callbacks)
            result = await run_loop(config, parts.history, parts.prompt, callbacks, cancel=cancel)
        except Exception as exc:
            failure = exc
            raise
        finally:
            summary = await self._end(result, failure, started)
        return summary

    async def aclose(self) -> None:
        """Close the parts of a run that was not run; a run closes its own (idempotent)."""
        if self._closed:
            return
        try:
            await self._close_used()
        finally:
            self._close_files()

    async def _end(
        self, result: RunResult | None, failure: Exception | None, began: float
    ) -> RunSummary:
        """Close the runner and the provider, then record the summary (also when the close
        failed), then close the files (also when recording failed)."""
        try:
            await self._close_used()
        finally:
            summary = self._recorder.summary(result, time.monotonic() - began)
            if failure is not None:
                summary = summary.model_copy(
                    update={"stop_reason": "error", "error": f"{type(failure).__name__}: {failure}"}
                )
            self.summary = summary
            try:
                self._recorder.done(summary)
            finally:
                self._close_files()
        return summary

    async def _close_used(self) -> None:
        """Close the runner (kill leftover jobs, end a sandbox session) and the provider, as
        far as the run owns them: before the summary, which then follows what they left."""
        self._closed = True
        parts = self._parts
        owned = [self._runner.aclose] if parts.closes_runner else []
        if parts.closes_provider:
            owned.append(parts.config.provider.aclose)
        await close_bounded(*owned)

    def _close_files(self) -> None:
        self._writer.close()
        if self._audit is not None:
            self._audit.close()
