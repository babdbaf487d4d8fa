"""Runs: started by a request, owned by the server.

`Runs.start` checks the request, writes the prompt to the session and answers at once;
the run itself proceeds in the server's task group, not the request's, so it finishes and
is saved when every client has gone. Each run publishes its events to its `EventLog`,
writes its steps to the session before announcing them, and records every approval
decision in the audit log. Cancelling a run (or shutting the server down) stops the model
and kills its commands; what was done is kept.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from logos.agent.config import Callbacks, Config
from logos.agent.loop import run as run_loop
from logos.agent.steps import RunResult
from logos.approvals.approval import (
    ApprovalMode,
    ApprovalRunner,
    Approver,
)
from logos.approvals.audit import AuditLog
from logos.approvals.rules import Verdicts, approver_for
from logos.ceiling import early_refusal
from logos.errors import RecordFileError
from logos.jsonl import utc_now
from logos.options import AllowedPath, ExecOptions
from logos.providers.base import Message
from logos.records.events import RunEvents, RunSummary, StartEvent
from logos.records.recorder import RunRecorder
from logos.records.trajectory import Trajectory, TrajectoryWriter
from logos.runners.base import Runner
from logos.serve.api import ApiError, LimitsRequest, RunnerRequest, RunRequest
from logos.serve.approvals import Approvals
from logos.serve.filechanges.tracker import (
    ChangeTrackers,
    TurnChanges,
    after_each_turn,
    writable_roots,
)
from logos.serve.hub import Changes, EventLog, read_published
from logos.serve.sessions import SessionBusy, Sessions, UnknownSession, new_id
from logos.serve.setup import RunnerChoice, ServerSetup

CLOSE_TIMEOUT_S = 10.0
"""At most this long to close a run's runner (kill leftovers, end a sandbox session)."""
KEPT_FINISHED = 1000
"""Finished runs whose status stays in memory; older ones are read from their event log."""
CONFIG_KEYS = {
    "max_steps": "max_steps",
    "max_cost_usd": "max_cost",
    "max_wall_s": "max_time",
    "max_tokens": "max_tokens",
    "max_total_tokens": "max_total_tokens",
}
"""The limits a request may narrow, and the config file's key of each."""
TIMEOUT_KEY = "timeout"

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


@dataclass(frozen=True)
class _Plan:
    """A checked request, ready to run."""

    run: Run
    prompt: str
    history: list[Message]
    config: Config
    runner: Runner
    writer: TrajectoryWriter
    audit: AuditLog
    workdir: str


class Runs:
    def __init__(
        self,
        setup: ServerSetup,
        sessions: Sessions,
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

    def start(self, request: RunRequest) -> Run:
        """Check the request, open the session and write its prompt; the run goes on in
        the background. ApiError says what stands in the way."""
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
        choice = RunnerChoice(
            sandbox=request.runner.kind == "sandbox", network=request.runner.network
        )
        approval = request.approval or ("auto" if choice.sandbox else "confirm")
        if approval == "auto" and not choice.sandbox and not settings.allow_local_auto:
            raise ApiError(
                403,
                'approval "auto" would run the model\'s commands on this machine without '
                "asking anyone: this server allows it only with allow_local_auto = true in "
                'its [serve] table; ask for approval "confirm", or run in the sandbox',
            )
        options = self._exec_options(request.runner, request.limits)
        choice = dataclasses.replace(choice, allowed_hosts=options.allowed_hosts)
        template = self._narrowed(request.limits)
        problem = self._setup.runners.problem(choice)
        if problem is not None:
            raise ApiError(503, problem)
        continued = self._claim_session(request.session)
        session_id = request.session or self.sessions.create()
        try:
            return self._open(request, choice, approval, options, template, session_id, continued)
        except BaseException:
            self.sessions.release(session_id)
            if continued is None:
                self.sessions.discard(session_id)
            raise

    def _open(
        self,
        request: RunRequest,
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
        try:
            runner = setup.runners.open(choice)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        try:
            writer = setup.session_writer(
                self.sessions.trajectory_path(session_id), choice, workdir, system_prompt, continued
            )
        except RecordFileError as exc:
            raise ApiError(409, exc.message) from None
        try:
            audit = AuditLog(
                setup.audit_path,
                mode=approval,
                runner=choice.kind,
                cwd=workdir,
                trajectory=str(writer.path),
            )
            writer.prompt(request.prompt)
            run_id = new_id()
            log = EventLog(
                self.sessions.runs_dir(session_id) / f"{run_id}.jsonl",
                replay_memory=setup.settings.replay_memory,
                subscriber_buffer=setup.settings.subscriber_buffer,
                on_publish=self.changes.bump,
            )
        except BaseException:
            writer.close()
            raise
        run = Run(run_id, session_id, choice, approval, log)
        plan = _Plan(
            run=run,
            prompt=request.prompt,
            history=continued.history() if continued is not None else [],
            config=dataclasses.replace(template, system_prompt=system_prompt, exec_options=options),
            runner=runner,
            writer=writer,
            audit=audit,
            workdir=workdir,
        )
        self._live[run_id] = run
        self._all_done = anyio.Event()
        self.changes.bump()
        assert self._group is not None
        self._group.start_soon(self._execute, plan)
        return run

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

    def _exec_options(self, runner: RunnerRequest, limits: LimitsRequest) -> ExecOptions:
        server_timeout = self._setup.template.exec_options.timeout_s
        if limits.timeout_s is not None and limits.timeout_s > server_timeout:
            raise _wider("timeout_s", limits.timeout_s, server_timeout, TIMEOUT_KEY)
        if runner.kind == "local":
            if runner.allowed_paths or runner.network or runner.allowed_hosts:
                raise ApiError(
                    400,
                    "allowed_paths, network and allowed_hosts are for the sandbox (runner.kind "
                    '"sandbox"): local commands reach the whole machine; give runner.workdir '
                    "instead",
                )
            workdir = runner.workdir or self._setup.workdir
            if not os.path.isabs(workdir) or not os.path.isdir(workdir):
                raise ApiError(
                    400, f"runner.workdir {workdir!r} is not an absolute path to a directory"
                )
            paths: tuple[AllowedPath, ...] = (
                AllowedPath(path=os.path.realpath(workdir), read_only=False),
            )
        else:
            if runner.workdir is not None:
                raise ApiError(
                    400,
                    "runner.workdir is for local commands: in the sandbox, the first of "
                    "runner.allowed_paths is the working directory",
                )
            if not runner.allowed_paths:
                raise ApiError(
                    400,
                    "a sandbox run needs runner.allowed_paths: the directories it may see, "
                    'e.g. [{"path": "/home/me/project", "read_only": false}]',
                )
            paths = tuple(AllowedPath(p.path, p.read_only) for p in runner.allowed_paths)
        hosts: tuple[str, ...] = ()
        if runner.kind == "sandbox":
            hosts = tuple(runner.allowed_hosts) or self._setup.template.exec_options.allowed_hosts
            if hosts and runner.network:
                raise ApiError(
                    400,
                    "runner.allowed_hosts limits a sandbox without network to those hosts, and "
                    "runner.network opens every host: send one or the other",
                )
            self._check_ceiling(paths)  # WHY last: a malformed request is told so first
        try:
            # WHY the template's path_ceiling kept: the server's own paths, pinned when it
            # started, are every run's ceiling: the sandbox holds each mount to them.
            return dataclasses.replace(
                self._setup.template.exec_options,
                allowed_paths=paths,
                allowed_hosts=hosts,
                timeout_s=limits.timeout_s or server_timeout,
            )
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None

    def _check_ceiling(self, paths: tuple[AllowedPath, ...]) -> None:
        """A 403 for a sandbox path outside the server's own paths as it is now: early and
        friendly, while the sandbox decides when it mounts it."""
        ceiling = self._setup.template.exec_options.path_ceiling
        if ceiling is None:
            return
        for path in paths:
            refused = early_refusal(path.path, read_only=path.read_only, ceiling=ceiling)
            if refused is not None:
                raise ApiError(403, refused)

    def _narrowed(self, limits: LimitsRequest) -> Config:
        template = self._setup.template
        asked: dict[str, Any] = {}
        for name, key in CONFIG_KEYS.items():
            value = getattr(limits, name)
            if value is None:
                continue
            ceiling = getattr(template, name)
            if ceiling is not None and value > ceiling:
                raise _wider(name, value, ceiling, key)
            asked[name] = value
        return dataclasses.replace(template, **asked)

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

    async def _execute(self, plan: _Plan) -> None:
        run = plan.run
        model = self._setup.model
        recorder = RunRecorder(
            plan.writer, plan.audit, RunEvents(run.log.publish), model=model.model
        )
        gated = ApprovalRunner(plan.runner, self._approver(run), recorder.decided)
        run.log.publish(
            StartEvent(
                provider=model.provider,
                model=model.model,
                runner=run.choice.kind,
                approval=run.approval,
                cwd=plan.workdir,
                trajectory=recorder.trajectory,
            )
        )
        watch = await self._follow_changes(run, plan.config.exec_options)
        await run_gated(
            plan.config,
            gated,
            plan.history,
            plan.prompt,
            recorder,
            run.cancel,
            lambda summary: self._finish(plan, recorder, summary),
            watch=watch,
        )

    async def _follow_changes(
        self, run: Run, options: ExecOptions
    ) -> Callable[[Callbacks], Callbacks] | None:
        """Snapshot the run's writable paths before its first command; after each turn, its
        `files_changed` event."""
        if self.trackers is None:
            return None
        roots = writable_roots([(p.path, p.read_only) for p in options.allowed_paths])
        changes = TurnChanges(self.trackers.open(run.id, roots), run.log.publish)
        await changes.begin()
        return after_each_turn(changes)

    def _approver(self, run: Run) -> Approver:
        asker = self._approvals.approver_for(run.id, run.log.publish)
        return approver_for(run.approval, self._rules, asker)

    def _finish(self, plan: _Plan, recorder: RunRecorder, summary: RunSummary) -> None:
        run = plan.run
        try:
            recorder.done(summary)
        finally:
            run.summary = summary
            run.ended_at = utc_now()
            run.log.close()
            plan.writer.close()
            plan.audit.close()
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


async def run_gated(
    config: Config,
    gated: ApprovalRunner,
    history: list[Message],
    prompt: str,
    recorder: RunRecorder,
    cancel: anyio.Event,
    finish: Callable[[RunSummary], None],
    *,
    watch: Callable[[Callbacks], Callbacks] | None = None,
) -> None:
    """Run the loop on `gated`, then close the runner (killing what is left) and hand
    `finish` the summary, however the loop ended: cancelled under it too, when the summary
    holds what its recorded steps spent. `watch`: the recorder's callbacks, with more."""
    started = time.monotonic()
    result: RunResult | None = None
    callbacks = recorder.callbacks()
    try:
        result = await run_loop(
            dataclasses.replace(config, runner=gated),
            history,
            prompt,
            callbacks if watch is None else watch(callbacks),
            cancel=cancel,
        )
    finally:
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CLOSE_TIMEOUT_S):
                await gated.aclose()
            finish(recorder.summary(result, time.monotonic() - started))


def _wider(name: str, asked: float, ceiling: float, key: str) -> ApiError:
    return ApiError(
        403,
        f"limits.{name} {asked:g} is above this server's limit of {ceiling:g} ({key} in its "
        f"config file): a request may narrow the server's limits, never widen them; ask for "
        f"{ceiling:g} or less",
    )


def _summary_fields(summary: RunSummary | None) -> dict[str, Any]:
    if summary is None:
        return {"stop_reason": None, "error": None, "usage": None, "cost_usd": None, "turns": None}
    data: dict[str, Any] = summary.model_dump(mode="json", exclude={"type", "trajectory"})
    return data
