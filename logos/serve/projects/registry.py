"""The projects of a server: made (their requests checked), loaded at start, changed,
removed; each one's turns run by its `engine.Project`, in the server's task group."""

from __future__ import annotations

import contextlib
import os

from anyio.abc import TaskGroup

from logos.approvals.approval import ApprovalDecision
from logos.approvals.audit import AuditLog
from logos.approvals.rules import Verdicts
from logos.ceiling import CeilingError
from logos.jsonl import utc_now
from logos.options.declarations import ALLOW, ALLOW_HOST, NETWORK, options_at
from logos.options.narrowing import (
    Asked,
    NarrowingRefused,
    asked_in,
    narrow,
    narrowed,
    sandbox_only,
)
from logos.options.option import Place, requested
from logos.serve.api import ApiError
from logos.serve.approvals import Approvals, RuleBook
from logos.serve.event_hub import Changes, EventLog
from logos.serve.filechanges.tracker import ChangeTrackers
from logos.serve.projects.briefing import BriefingError, check_templates
from logos.serve.projects.calls import runner_choice
from logos.serve.projects.events import AgentChanged
from logos.serve.projects.permissions import pinned, project_ceiling
from logos.serve.projects.store import ProjectStore
from logos.serve.projects.turns import LOGOS, USER, Project, Services, read_chat
from logos.serve.projects.wire import (
    AgentRecord,
    AgentRequest,
    ProjectChange,
    ProjectFields,
    ProjectRecord,
    SavedPath,
)
from logos.serve.sessions import new_id
from logos.serve.setup import ServerSetup


class Projects:
    """Every project of the server."""

    def __init__(
        self,
        setup: ServerSetup,
        approvals: Approvals,
        rules: Verdicts,
        rule_book: RuleBook | None,
        trackers: ChangeTrackers | None = None,
    ) -> None:
        self.setup = setup
        self.trackers = trackers
        self._services = Services(setup, approvals, rules, rule_book, trackers)
        self.store = ProjectStore(setup.state_dir / "projects")
        self._projects: dict[str, Project] = {}
        self._group: TaskGroup | None = None
        self.changes = Changes()
        """Bumped by every project's events, as a project is made and removed: what the
        page's list of projects follows."""
        self.problems: list[str] = []
        """Saved projects that could not be read (named at start)."""

    def bind(self, group: TaskGroup) -> None:
        """Load the saved projects and start their workers in the server's task group."""
        self._group = group
        for loaded in self.store.load_all():
            if isinstance(loaded, tuple):
                path, why = loaded
                self.problems.append(f"{path}: {why}")
                continue
            project = self._open(loaded)
            if _pin_unpinned(loaded):
                project.save()
            project.recover()
            group.start_soon(project.work)

    def _open(self, record: ProjectRecord) -> Project:
        settings = self.setup.settings
        path = self.store.events_path(record.id)
        chat = read_chat(path) if path.exists() else []
        log = EventLog(
            path,
            replay_memory=settings.replay_memory,
            subscriber_buffer=settings.subscriber_buffer,
            on_publish=self.changes.bump,
            resume=True,
        )
        project = Project(record, self.store, log, chat, self._services)
        self._projects[record.id] = project
        return project

    def all(self) -> list[Project]:
        return list(self._projects.values())

    def get(self, project_id: str) -> Project:
        project = self._projects.get(project_id)
        if project is None:
            raise ApiError(404, f"no project {project_id[:64]!r}: GET /v1/projects lists them")
        return project

    def create(self, request: ProjectFields) -> Project:
        if self._group is None:
            raise ApiError(503, "the server is shutting down: make the project on its next start")
        same = next((p for p in self._projects.values() if p.record.name == request.name), None)
        if same is not None:
            raise ApiError(
                409,
                f"a project named {request.name!r} exists already ({same.record.id}): pick "
                "another name (the CLI finds projects by name)",
            )
        try:
            check_templates(request.briefings, request.name, request.goal)
        except BriefingError as exc:
            raise ApiError(422, str(exc)) from None
        asked = [(p.path, p.read_only) for p in requested(request, ALLOW, Place.PROJECT) or ()]
        paths = _granted(asked or [(self.setup.workdir, False)])
        record = ProjectRecord(
            id=new_id(),
            name=request.name,
            goal=request.goal,
            description=request.description,
            budget=request.budget,
            allowed_paths=paths,
            allowed_hosts=list(requested(request, ALLOW_HOST, Place.PROJECT) or ()),
            double_texting=request.double_texting,
            max_hops=request.max_hops,
            max_rounds=request.max_rounds,
            context_tokens=request.context_tokens,
            briefings=request.briefings,
            created_at=utc_now(),
        )
        self.store.save(record)
        project = self._open(record)
        project.project_changed("created")
        self._group.start_soon(project.work)
        return project

    def change(self, project: Project, change: ProjectChange) -> None:
        record = project.record
        if change.goal is not None:
            record.goal = change.goal
            project.save()
            project.project_changed("goal")
        if change.progress is not None:
            record.progress = change.progress
            project.save()
            project.project_changed("progress")
        if change.double_texting is not None:
            record.double_texting = change.double_texting
            project.save()
            project.project_changed("settings")

    def add_agent(self, project: Project, request: AgentRequest) -> AgentRecord:
        record = project.record
        if record.agent(request.name) is not None:
            raise ApiError(
                409, f"the project has an agent {request.name!r} already: pick another name"
            )
        if request.name in (USER, LOGOS):
            raise ApiError(
                422, f"{request.name!r} is reserved (the person, logos's notes): pick another name"
            )
        captain = record.captain
        if request.role == "captain" and captain is not None:
            raise ApiError(
                409,
                f"the project has a captain already ({captain.name}): a project has exactly one; "
                "add this agent as a talon",
            )
        runner, here = request.runner, Place.AGENT_RUNNER
        sandbox = runner.kind == "sandbox"
        if not sandbox and (
            requested(runner, NETWORK, here) or requested(runner, ALLOW_HOST, here)
        ):
            fields = [option.name_at(here) for option in options_at(here) if option != ALLOW]
            raise ApiError(400, sandbox_only(fields, "runner.kind"))
        paths = _granted([(p.path, p.read_only) for p in requested(runner, ALLOW, here) or ()])
        asked = [ask for ask in asked_in(runner, here) if ask.option != ALLOW]
        if paths:
            asked.append(Asked(ALLOW, here.prefix + ALLOW.name_at(here), paths))
        outcome = narrow(project_ceiling(record, sandbox=sandbox), asked)
        malformed = [refusal for refusal in outcome.refusals if not refusal.wider]
        if malformed:
            raise ApiError(400, malformed[0].message)
        beyond = [refusal.what for refusal in outcome.refusals]
        if beyond and not request.grant:
            raise ApiError(
                403,
                f"agent {request.name} would reach beyond its project: {'; '.join(beyond)}. "
                "Give it less, widen the project, or send grant: true to grant it explicitly "
                "(recorded in the chat and the audit log)",
            )
        settings = self.setup.settings
        approval = request.approval or ("auto" if sandbox else "confirm")
        if approval == "auto" and not sandbox and not settings.allow_local_auto:
            raise ApiError(
                403,
                'approval "auto" would run this agent\'s commands on this machine without asking '
                "anyone: this server allows it only with allow_local_auto = true in its [serve] "
                'table; ask for approval "confirm", or run it in the sandbox',
            )
        try:
            narrowed(self.setup.ceiling, asked_in(request.model, Place.AGENT_MODEL))
        except NarrowingRefused as exc:
            raise ApiError(403 if exc.wider else 400, str(exc)) from None
        agent = AgentRecord(
            name=request.name,
            role=request.role,
            model=request.model,
            runner_kind=runner.kind,
            allowed_paths=paths or [p.model_copy() for p in record.allowed_paths],
            allowed_hosts=list(outcome.values.hosts),
            network=bool(outcome.values[NETWORK]),
            approval=approval,
            granted=bool(beyond),
            created_at=utc_now(),
        )
        problem = self.setup.runners.problem(runner_choice(agent))
        if problem is not None:
            raise ApiError(503, problem)
        if beyond:
            self._audit_grant(record, agent, beyond)
        record.agents.append(agent)
        project.save()
        project.agent_changed(agent, "created")
        if beyond:
            project.note(f"the person granted {agent.name} beyond the project: {'; '.join(beyond)}")
        return agent

    def _audit_grant(self, record: ProjectRecord, agent: AgentRecord, beyond: list[str]) -> None:
        with AuditLog(
            self.setup.audit_path,
            mode=agent.approval,
            runner=agent.runner_kind,
            cwd=agent.allowed_paths[0].path if agent.allowed_paths else self.setup.workdir,
            trajectory=str(self.store.session_path(record.id, agent.name)),
        ) as audit:
            audit.record(
                ApprovalDecision(
                    "yes",
                    f"grant agent {agent.name} of project {record.name!r} ({record.id}): "
                    + "; ".join(beyond),
                    reason="granted by the person as the agent was made",
                )
            )

    def set_agent_running(self, project: Project, name: str, running: bool) -> AgentRecord:
        agent = self._agent(project, name)
        if running and agent.status == "stopped":
            agent.status = "idle"
            project.save()
            project.agent_changed(agent, "started")
        elif not running and agent.status != "stopped":
            call = project.call
            agent.status = "stopped"
            project.save()
            project.agent_changed(agent, "stopped")
            if call is not None and call.agent == name:
                project.stop_turn(f"{name} was stopped")
        return agent

    def remove_agent(self, project: Project, name: str, promote: str | None) -> None:
        record = project.record
        agent = self._agent(project, name)
        if agent.role == "captain":
            successor = record.agent(promote or "")
            if successor is None or successor is agent:
                raise ApiError(
                    409,
                    f"{name} is the captain, and a project has exactly one: name the talon that "
                    "takes over with ?promote=NAME, or delete the project",
                )
            successor.role = "captain"
            successor.briefed = False  # WHY: its next message brings the captain's briefing
            project.agent_changed(successor, "promoted")
            project.note(f"{successor.name} is the captain now")
        call = project.call
        record.agents.remove(agent)
        if record.listening == name:
            record.listening = None
        project.save()
        project.publish(
            AgentChanged(agent=name, role=agent.role, status="removed", change="removed")
        )
        if call is not None and call.agent == name:
            project.stop_turn(f"{name} was removed during its turn")

    def _agent(self, project: Project, name: str) -> AgentRecord:
        agent = project.record.agent(name)
        if agent is None:
            raise ApiError(
                404,
                f"project {project.record.name!r} has no agent {name[:64]!r} (agents: "
                f"{', '.join(project.names()[0]) or 'none'})",
            )
        return agent

    def delete(self, project: Project) -> None:
        if project.busy:
            raise ApiError(409, "a turn is running: stop the project first, then delete it")
        project.closing = True
        project.wake()
        project.log.close()
        del self._projects[project.record.id]
        self.store.delete(project.record.id)
        if self.trackers is not None:
            self.trackers.remove(project.record.id)
        self.changes.bump()

    async def shutdown(self) -> None:
        """End every turn (what was done is kept), then the workers, and close the logs."""
        for project in self._projects.values():
            project.closing = True
            project.stop_turn("the server is stopping")
            project.wake()
        for project in self._projects.values():
            await project.done.wait()
            project.log.close()
        self.changes.close()


def _granted(asked: list[tuple[str, bool]]) -> list[SavedPath]:
    """The directories asked for, each pinned now: what a project or an agent is granted."""
    paths = []
    for path, read_only in asked:
        try:
            saved = pinned(path, read_only)
        except CeilingError as exc:
            raise ApiError(400, str(exc)) from None
        if not os.path.isdir(saved.path):
            raise ApiError(400, f"allowed path {saved.path!r} is no directory on this machine")
        paths.append(saved)
    return paths


def _pin_unpinned(record: ProjectRecord) -> bool:
    """Pin the paths of a project saved before paths were pinned (as they are now: the best
    that is left); whether any was. One that cannot be pinned stays no root."""
    changed = False
    for holder in (record.allowed_paths, *(agent.allowed_paths for agent in record.agents)):
        for index, saved in enumerate(holder):
            if saved.device is None or saved.inode is None:
                with contextlib.suppress(CeilingError):
                    holder[index] = pinned(saved.path, saved.read_only)
                    changed = True
    return changed
