"""The projects' HTTP API (Starlette routes, behind the server's checks):

    POST   /v1/projects                          make one → its status
    GET    /v1/projects                          every project's status
    GET    /v1/projects/{id}                     one's status: agents, spend, queue, approvals
    PATCH  /v1/projects/{id}                     {"goal"|"progress"|"double_texting": …}
    DELETE /v1/projects/{id}
    POST   /v1/projects/{id}/agents              add an agent
    DELETE /v1/projects/{id}/agents/{name}       remove one (?promote=NAME for a captain)
    POST   /v1/projects/{id}/agents/{name}/stop  stop one (its call ends, what it did is kept)
    POST   /v1/projects/{id}/agents/{name}/start
    POST   /v1/projects/{id}/pause | /resume
    POST   /v1/projects/{id}/stop                {"scope": "turn"|"project"}
    POST   /v1/projects/{id}/messages            {"text": …}: the person's message → 202
    GET    /v1/projects/{id}/messages            the chat as the agents are told it
    POST   /v1/projects/{id}/guard               {"action": "continue"|"stop"|"pick", "agent"}
    POST   /v1/projects/{id}/approvals/{aid}     {"approve", "reason", "always"}
    GET    /v1/projects/{id}/events              server-sent events; Last-Event-ID replays
    GET    /v1/hierarchy                         projects → agents with status
    GET    /v1/metrics                           projects, agents and spend, counted

Imports Starlette (the optional extra), as `logos.serve.app` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from logos.serve.api import ApiError
from logos.serve.http import M, event_stream, last_event_id, read_body
from logos.serve.projects.events import Resume
from logos.serve.projects.registry import Projects
from logos.serve.projects.turns import Project
from logos.serve.projects.wire import (
    AgentRequest,
    GuardAnswer,
    MessageRequest,
    ProjectApprovalAnswer,
    ProjectChange,
    ProjectRequest,
    StopRequest,
)


def project_routes(projects: Projects) -> list[Route]:
    api = _ProjectsApi(projects)
    base = "/v1/projects/{project_id}"
    return [
        Route("/v1/projects", api.create, methods=["POST"]),
        Route("/v1/projects", api.list, methods=["GET"]),
        Route(base, api.status, methods=["GET"]),
        Route(base, api.change, methods=["PATCH"]),
        Route(base, api.delete, methods=["DELETE"]),
        Route(base + "/agents", api.add_agent, methods=["POST"]),
        Route(base + "/agents/{name}", api.remove_agent, methods=["DELETE"]),
        Route(base + "/agents/{name}/stop", api.stop_agent, methods=["POST"]),
        Route(base + "/agents/{name}/start", api.start_agent, methods=["POST"]),
        Route(base + "/pause", api.pause, methods=["POST"]),
        Route(base + "/resume", api.resume, methods=["POST"]),
        Route(base + "/stop", api.stop, methods=["POST"]),
        Route(base + "/messages", api.send, methods=["POST"]),
        Route(base + "/messages", api.messages, methods=["GET"]),
        Route(base + "/guard", api.guard, methods=["POST"]),
        Route(base + "/approvals/{approval_id}", api.decide, methods=["POST"]),
        Route(base + "/events", api.events, methods=["GET"]),
        Route("/v1/hierarchy", api.hierarchy, methods=["GET"]),
        Route("/v1/metrics", api.metrics, methods=["GET"]),
    ]


class _ProjectsApi:
    def __init__(self, projects: Projects) -> None:
        self._projects = projects
        self._settings = projects.setup.settings

    async def _body(self, request: Request, model: type[M]) -> M:
        return await read_body(request, model, self._settings.max_body_bytes)

    def _project(self, request: Request) -> Project:
        return self._projects.get(request.path_params["project_id"])

    async def create(self, request: Request) -> Response:
        asked = await self._body(request, ProjectRequest)
        project = self._projects.create(asked)
        return JSONResponse(project.status(), status_code=201)

    async def list(self, request: Request) -> Response:
        return JSONResponse({"projects": [p.status() for p in self._projects.all()]})

    async def status(self, request: Request) -> Response:
        return JSONResponse(self._project(request).status())

    async def change(self, request: Request) -> Response:
        project = self._project(request)
        self._projects.change(project, await self._body(request, ProjectChange))
        return JSONResponse(project.status())

    async def delete(self, request: Request) -> Response:
        self._projects.delete(self._project(request))
        return Response(status_code=204)

    async def add_agent(self, request: Request) -> Response:
        project = self._project(request)
        agent = self._projects.add_agent(project, await self._body(request, AgentRequest))
        return JSONResponse(project.agent_status(agent), status_code=201)

    async def remove_agent(self, request: Request) -> Response:
        project = self._project(request)
        promote = request.query_params.get("promote")
        self._projects.remove_agent(project, request.path_params["name"], promote)
        return Response(status_code=204)

    async def stop_agent(self, request: Request) -> Response:
        project = self._project(request)
        agent = self._projects.set_agent_running(project, request.path_params["name"], False)
        return JSONResponse(project.agent_status(agent))

    async def start_agent(self, request: Request) -> Response:
        project = self._project(request)
        agent = self._projects.set_agent_running(project, request.path_params["name"], True)
        return JSONResponse(project.agent_status(agent))

    async def pause(self, request: Request) -> Response:
        project = self._project(request)
        project.pause(True)
        return JSONResponse(project.status())

    async def resume(self, request: Request) -> Response:
        project = self._project(request)
        project.pause(False)
        return JSONResponse(project.status())

    async def stop(self, request: Request) -> Response:
        project = self._project(request)
        asked = await self._body(request, StopRequest)
        if asked.scope == "project":
            project.pause(True)
            stopped = project.stop_turn("the person stopped the project")
        else:
            stopped = project.stop_turn("the person stopped the turn")
        return JSONResponse({"stopped": stopped, **project.status()}, status_code=202)

    async def send(self, request: Request) -> Response:
        project = self._project(request)
        asked = await self._body(request, MessageRequest)
        return JSONResponse(project.send(asked.text), status_code=202)

    async def messages(self, request: Request) -> Response:
        chat = self._project(request).chat
        return JSONResponse({"messages": [entry.model_dump() for entry in chat]})

    async def guard(self, request: Request) -> Response:
        project = self._project(request)
        project.answer_guard(await self._body(request, GuardAnswer))
        return JSONResponse(project.status())

    async def decide(self, request: Request) -> Response:
        project = self._project(request)
        answer = await self._body(request, ProjectApprovalAnswer)
        if answer.always and not answer.approve:
            raise ApiError(422, "always is for approving: allow commands like this one, or deny")
        agent = project.decide(
            request.path_params["approval_id"], answer.approve, answer.reason, answer.always
        )
        return JSONResponse({"id": request.path_params["approval_id"], "agent": agent})

    async def events(self, request: Request) -> Response:
        project = self._project(request)
        after = last_event_id(request)
        if after > project.log.last_id:
            raise ApiError(
                400,
                f"Last-Event-ID {after} is past this project's last event "
                f"({project.log.last_id}): reconnect without it",
            )
        keepalive_s = self._settings.keepalive_s
        subscription = project.log.subscribe(after)

        async def live() -> AsyncIterator[bytes]:
            yield b"retry: 1000\n\n"
            sent = after
            async for event in subscription.events(keepalive_s):
                if event is None:
                    yield b": keep-alive\n\n"
                else:
                    sent = event.id
                    yield event.frame()
            if subscription.dropped:
                resume = Resume(after=sent).model_dump_json()
                yield f"event: resume\ndata: {resume}\n\n".encode()
                yield (
                    f": this stream fell a whole buffer behind and was dropped; reconnect "
                    f"with Last-Event-ID: {sent} to get the rest\n\n"
                ).encode()

        return event_stream(live())

    async def hierarchy(self, request: Request) -> Response:
        return JSONResponse(
            {
                "projects": [
                    {
                        "id": p.record.id,
                        "name": p.record.name,
                        "status": p.status()["status"],
                        "agents": [
                            {"name": a.name, "role": a.role, "status": a.status}
                            for a in p.record.agents
                        ],
                    }
                    for p in self._projects.all()
                ]
            }
        )

    async def metrics(self, request: Request) -> Response:
        projects = self._projects.all()
        agents = [a for p in projects for a in p.record.agents]
        counts: dict[str, Any] = {
            "projects": {
                "active": sum(1 for p in projects if not p.record.paused),
                "paused": sum(1 for p in projects if p.record.paused),
                "busy": sum(1 for p in projects if p.busy),
            },
            "agents": {
                "running": sum(1 for a in agents if a.status != "stopped"),
                "busy": sum(1 for a in agents if a.status == "busy"),
                "stopped": sum(1 for a in agents if a.status == "stopped"),
            },
            "spend": {
                "tokens": sum(p.record.spent.tokens for p in projects),
                "cost_usd": sum(p.record.spent.cost_usd for p in projects),
                "cost_known": all(p.record.spent.cost_known for p in projects),
                "wall_s": sum(p.record.spent.wall_s for p in projects),
            },
            "queued_messages": sum(len(p.record.queue) for p in projects),
            "pending_approvals": sum(len(p.record.approvals) for p in projects),
        }
        return JSONResponse(counts)
