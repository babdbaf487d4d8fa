"""Runs: started by a request, owned by the server.

`Runs.start` checks the request, opens the run's parts (`logos.assembly`: the session's
trajectory, the audit log, the runner) and answers at once; the run itself proceeds in the
server's task group, not the request's, so it finishes and is saved when every client has
gone. Each run publishes its events to its `EventLog`, writes its steps to the session
before announcing them, and records every approval decision in the audit log. Cancelling a
run (or shutting the server down) stops the model and kills its commands; what was done is
kept.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from logos.agent.config import Config
from logos.approvals.approval import ApprovalMode
from logos.approvals.rules import Verdicts, approver_for
from logos.assembly import Approval, RunAssembly, RunParts
from logos.errors import RecordFileError
from logos.jsonl import utc_now
from logos.options import AllowedPath, ExecOptions
from logos.options.declarations import (
    ALLOW,
    MAX_COST,
    MAX_STEPS,
    MAX_TIME,
    MAX_TOKENS,
    MAX_TOTAL_TOKENS,
    NETWORK,
    TIMEOUT,
    options_at,
)
from logos.options.narrowing import NarrowingRefused, asked_in, narrowed, sandbox_only
from logos.options.option import Place, requested
from logos.records.events import RunEvents, RunSummary
from logos.records.trajectory import Trajectory
from logos.serve.api import ApiError, ServedRunRequest
from logos.serve.approvals import Approvals
from logos.serve.event_hub import Changes, EventLog, read_published
from logos.serve.filechanges.tracker import (
    ChangeTrackers,
    TurnChanges,
    after_each_turn,
    writable_roots,
)
from logos.serve.sessions import SessionBusy, SessionStore, UnknownSession, new_id
from logos.serve.setup import RunnerChoice, ServerSetup

KEPT_FINISHED = 1000
"""Finished runs whose status stays in memory; older ones are read from their event log."""

RunState = Literal["running", "finished"]


@dataclass
class Run:
    id: str
    session_id: str
    choice: RunnerChoice
    approval: ApprovalMode
    log: EventLog
    created_at: str = field(default_factory=utc_now)
    cancel: anyio.Event = field(default_factory=anyio.Event)
    summary: RunSummary | None = None
    ended_at: str | None = None

    @property
    def state(self) -> RunState:
        return "running" if self.summary is None else "finished"

    def status(self, pending: list[str]) -> dict[str, Any]:
        summary = self.summary
        return {
            "id": self.id,
            "session": self.session_id,
            "status": self.state,
            "runner": self.choice.kind,
            "approval": self.approval,
            "created_at": self.created_at,
            "ended_at": self.ended_at,
            "events": self.log.last_id,
            "pending_approvals": pending,
            **_summary_fields(summary),
        }


class Runs:
    def __init__(
        self,
        setup: ServerSetup,
        sessions: SessionStore,
        approvals: Approvals,
        rules: Verdicts,
        trackers: ChangeTrackers | None = None,
    ) -> None:
        self._setup = setup
        self.trackers = trackers
        """Where each run's changed files are followed (None: they are not)."""
        self._rules = rules
        """The approval rules every run follows, read at each command (the server's book)."""
        self.sessions = sessions
        self._approvals = approvals
        self._live: dict[str, Run] = {}
        self._finished: OrderedDict[str, Run] = OrderedDict()
        self._group: TaskGroup | None = None
        self._accepting = True
        self._all_done = anyio.Event()
        self._all_done.set()
        self.changes = Changes()
        """Bumped by every run's events, and as a run ends: what the runs list follows."""

    def bind(self, group: TaskGroup) -> None:
        """The task group that owns the runs: the server's, not a request's."""
        self._group = group

    @property
    def live(self) -> list[Run]:
        return list(self._live.values())

    def get(self, run_id: str) -> Run | None:
        return self._live.get(run_id) or self._finished.get(run_id)

    async def start(self, request: ServedRunRequest) -> Run:
        """Check the request, open the session and the run's parts; the run goes on in the
        background. ApiError says what stands in the way."""
        settings = self._setup.settings
        sandbox = request.runner.kind == "sandbox"
        approval = request.approval or ("auto" if sandbox else "confirm")
        if approval == "auto" and not sandbox and not settings.allow_local_auto:
            raise ApiError(
                403,
                'approval "auto" would run the model\'s commands on this machine without '
                "asking anyone: this server allows it only with allow_local_auto = true in "
                'its [serve] table; ask for approval "confirm", or run in the sandbox',
            )
        choice, options, template = self._narrowed(request)
        problem = self._setup.runners.problem(choice)
        if problem is not None:
            raise ApiError(503, problem)
        continued = self._claim_session(request.session)
        session_id = request.session or self.sessions.create()
        try:
            return await self._open(
                request, choice, approval, options, template, session_id, continued
            )
        except BaseException:
            self.sessions.release(session_id)
            if continued is None:
                self.sessions.discard(session_id)
            raise

    async def _open(
        self,
        request: ServedRunRequest,
        choice: RunnerChoice,
        approval: ApprovalMode,
        options: ExecOptions,
        template: Config,
        session_id: str,
        continued: Trajectory | None,
    ) -> Run:
        setup = self._setup
        workdir = options.resolved_workdir() or setup.workdir
        system_prompt = setup.runners.system_prompt(choice, options, continued)
        run_id = new_id()
        log = EventLog(
            self.sessions.runs_dir(session_id) / f"{run_id}.jsonl",
            replay_memory=setup.settings.replay_memory,
            subscriber_buffer=setup.settings.subscriber_buffer,
            on_publish=self.changes.bump,
        )
        approver = approver_for(
            approval, self._rules, self._approvals.approver_for(run_id, log.publish)
        )
        changes = self._changes_of(run_id, log, options)
        parts = RunParts(
            config=dataclasses.replace(template, system_prompt=system_prompt, exec_options=options),
            prompt=request.prompt,
            history=continued.history() if continued is not None else [],
            open_runner=partial(setup.runners.open, choice),
            open_trajectory=partial(
                setup.session_writer,
                self.sessions.trajectory_path(session_id),
                choice,
                workdir,
                system_prompt,
                continued,
            ),
            observer=RunEvents(log.publish),
            approval=Approval(approval, approver, setup.audit_path),
            runner_kind=choice.kind,
            cwd=workdir,
            watch=None if changes is None else after_each_turn(changes),
        )
        try:
            assembly = await _opened(parts)
            try:
                # WHY after opening: no other request runs between this check and the
                # registration below, whatever opening awaited.
                self._check_room()
            except BaseException:
                await assembly.aclose()
                raise
        except BaseException:
            log.close()
            log.path.unlink(missing_ok=True)  # WHY: a run that never started has no events
            raise
        run = Run(run_id, session_id, choice, approval, log)
        self._live[run_id] = run
        self._all_done = anyio.Event()
        self.changes.bump()
        assert self._group is not None
        self._group.start_soon(self._execute, run, assembly, changes)
        return run

    def _changes_of(self, run_id: str, log: EventLog, options: ExecOptions) -> TurnChanges | None:
        """What the run's commands change in its writable paths, each turn's published as a
        `files_changed` event (None: the server follows no changes)."""
        if self.trackers is None:
            return None
        roots = writable_roots([(p.path, p.read_only) for p in options.allowed_paths])
        return TurnChanges(self.trackers.open(run_id, roots), log.publish)

    def _check_room(self) -> None:
        settings = self._setup.settings
        if not self._accepting or self._group is None:
            raise ApiError(503, "the server is shutting down: start the run on its next start")
        if len(self._live) >= settings.max_concurrent_runs:
            raise ApiError(
                429,
                f"{len(self._live)} runs are going, the most max_concurrent_runs "
                f"({settings.max_concurrent_runs}, in the config file's [serve] table) allows: "
                "wait for one to end, or raise the setting",
            )

    def _claim_session(self, session_id: str | None) -> Trajectory | None:
        if session_id is None:
            return None
        try:
            self.sessions.directory(session_id)
        except UnknownSession:
            raise ApiError(404, f"no session {session_id!r}: GET /v1/sessions lists them") from None
        try:
            self.sessions.claim(session_id)
        except SessionBusy:
            raise ApiError(
                409,
                f"session {session_id!r} has a run going: wait for it to end (or cancel it), "
                "then continue the session",
            ) from None
        try:
            return self.sessions.load(session_id)
        except RecordFileError as exc:
            self.sessions.release(session_id)
            raise ApiError(409, exc.message) from None

    def _narrowed(self, request: ServedRunRequest) -> tuple[RunnerChoice, ExecOptions, Config]:
        """Where the run's commands run, their options and the run's config: the server's,
        narrowed as the request asks (`logos.options.narrowing`); ApiError for what it may
        not ask (400: malformed, 403: wider than the server's)."""
        template = self._setup.template
        runner = request.runner
        asked = asked_in(request.limits, Place.SERVE_LIMITS)
        if runner.kind == "local":
            if any(ask.value for ask in asked_in(runner, Place.SERVE_RUNNER)):
                fields = [
                    option.name_at(Place.SERVE_RUNNER) for option in options_at(Place.SERVE_RUNNER)
                ]
                refused = sandbox_only(fields, "runner.kind")
                raise ApiError(400, f"{refused}; give runner.workdir instead")
            workdir = runner.workdir or self._setup.workdir
            if not os.path.isabs(workdir) or not os.path.isdir(workdir):
                raise ApiError(
                    400, f"runner.workdir {workdir!r} is not an absolute path to a directory"
                )
        else:
            if runner.workdir is not None:
                raise ApiError(
                    400,
                    "runner.workdir is for local commands: in the sandbox, the first of "
                    "runner.allowed_paths is the working directory",
                )
            if not requested(runner, ALLOW, Place.SERVE_RUNNER):
                raise ApiError(
                    400,
                    "a sandbox run needs runner.allowed_paths: the directories it may see, "
                    'e.g. [{"path": "/home/me/project", "read_only": false}]',
                )
            asked += asked_in(runner, Place.SERVE_RUNNER)
        try:
            values = narrowed(self._setup.ceiling, asked)
        except NarrowingRefused as exc:
            raise ApiError(403 if exc.wider else 400, str(exc)) from None
        paths, hosts = values.paths, values.hosts
        if runner.kind == "local":
            paths, hosts = (AllowedPath(path=os.path.realpath(workdir), read_only=False),), ()
        try:
            # WHY the template's path_ceiling kept: the server's own paths, pinned when it
            # started, are every run's ceiling: the sandbox holds each mount to them.
            options = dataclasses.replace(
                template.exec_options,
                allowed_paths=paths,
                allowed_hosts=hosts,
                timeout_s=values[TIMEOUT] or template.exec_options.timeout_s,
            )
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        config = dataclasses.replace(
            template,
            max_steps=values[MAX_STEPS] or template.max_steps,
            max_cost_usd=values[MAX_COST],
            max_wall_s=values[MAX_TIME],
            max_tokens=values[MAX_TOKENS],
            max_total_tokens=values[MAX_TOTAL_TOKENS],
        )
        choice = RunnerChoice(
            sandbox=runner.kind == "sandbox",
            network=bool(values[NETWORK]),
            allowed_hosts=options.allowed_hosts,
        )
        return choice, options, config

    def cancel(self, run_id: str) -> Run:
        run = self._live.get(run_id)
        if run is None:
            if self.status(run_id) is not None:
                raise ApiError(409, f"run {run_id!r} has finished already: nothing to cancel")
            raise ApiError(404, f"no run {run_id!r}")
        run.cancel.set()
        return run

    def status(self, run_id: str) -> dict[str, Any] | None:
        """A run's status: live, recently finished, or read back from its event log."""
        run = self.get(run_id)
        if run is not None:
            return run.status([p.id for p in self._approvals.pending(run_id)])
        path = self.sessions.run_log(run_id)
        if path is None:
            return None
        events = list(read_published(path, 0))
        done = next((e for e in reversed(events) if e.type == "done"), None)
        summary = RunSummary.model_validate_json(done.data) if done is not None else None
        return {
            "id": run_id,
            "session": path.parent.parent.name,
            "status": "finished" if summary is not None else "interrupted",
            "events": events[-1].id if events else 0,
            "pending_approvals": [],
            **_summary_fields(summary),
        }

    def statuses(self) -> list[dict[str, Any]]:
        """The live runs, then those finished lately (the most recent first)."""
        runs = [*self._live.values(), *reversed(self._finished.values())]
        return [run.status([p.id for p in self._approvals.pending(run.id)]) for run in runs]

    def log_path(self, run_id: str) -> Path | None:
        return self.sessions.run_log(run_id)

    async def shutdown(self) -> None:
        """Refuse new runs, cancel the live ones and wait until each is saved."""
        self._accepting = False
        for run in self._live.values():
            run.cancel.set()
        await self._all_done.wait()
        self.changes.close()

    async def _execute(self, run: Run, assembly: RunAssembly, changes: TurnChanges | None) -> None:
        try:
            if changes is not None:
                await changes.begin()  # WHY before the first command: what it changes shows
            await assembly.run(run.cancel)
        finally:
            with anyio.CancelScope(shield=True):
                await assembly.aclose()  # WHY: a run cancelled before it ran still closes
            self._finish(run, assembly.summary)

    def _finish(self, run: Run, summary: RunSummary | None) -> None:
        run.summary = summary
        run.ended_at = utc_now()
        run.log.close()
        self.sessions.release(run.session_id)
        self._live.pop(run.id, None)
        self._finished[run.id] = run
        if self.trackers is not None:
            self.trackers.finish(run.id)
        while len(self._finished) > KEPT_FINISHED:
            self._finished.popitem(last=False)
        if not self._live:
            self._all_done.set()
        self.changes.bump()


async def _opened(parts: RunParts) -> RunAssembly:
    """The run's parts opened; ApiError for what the request asked that cannot be."""
    try:
        return await RunAssembly.open(parts)
    except ValueError as exc:  # the runner it asks for
        raise ApiError(400, str(exc)) from None
    except RecordFileError as exc:  # its session's trajectory, or the audit log
        raise ApiError(409, exc.message) from None


def _summary_fields(summary: RunSummary | None) -> dict[str, Any]:
    if summary is None:
        return {"stop_reason": None, "error": None, "usage": None, "cost_usd": None, "turns": None}
    data: dict[str, Any] = summary.model_dump(mode="json", exclude={"type", "trajectory"})
    return data
