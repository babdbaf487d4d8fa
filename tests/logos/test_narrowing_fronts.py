"""Every front refuses a caller's widening in the same words (`logos.options.narrowing`),
through its real interface: `logos serve`'s runs and a project's agents over HTTP,
`logos mcp`'s task tool and `sandboxd mcp`'s run tool through the MCP SDK's client.

(`sandboxd mcp` refuses before it asks its daemon: a socket nobody listens on does.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from logos.mcp.task_server import TaskLimits, build_task_server
from logos.options.declarations import options_at
from logos.options.narrowing import RULE
from logos.options.option import Place
from sandboxd.mcp.limits import McpLaunch
from sandboxd.mcp.server import build_server
from tests.support.cli_harness import Home, make_home, openai_env
from tests.support.mcp_servers import stdio_server
from tests.support.serve_harness import Served, serving
from tests.support.sse_server import ScriptedServer

pytestmark = pytest.mark.timeout(120)

SERVER_RULE = RULE.format(owner="this server")
PROJECT_RULE = RULE.format(owner="the project")


def above(field: str, asked: int, limit: int, where: str) -> str:
    """The one wording of a number asked above its ceiling."""
    return (
        f"{field} {asked} is above this server's limit of {limit} ({where}): {SERVER_RULE}; "
        f"ask for {limit} or less"
    )


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return make_home(tmp_path_factory.mktemp("narrowing-fronts"))


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(module_home: Home, model: ScriptedServer) -> Iterator[Served]:
    allow = ["--allow", f"{module_home.work}:rw"]
    with serving(module_home, model, allow, config="max_steps = 5\n") as server:
        yield server


@pytest.fixture(scope="module")
def project(served: Served) -> str:
    with served.client() as client:
        made = client.post("/v1/projects", json={"name": "fronts", "allowed_hosts": ["pypi.org"]})
    assert made.status_code == 201, made.text
    project_id: str = made.json()["id"]
    return project_id


def _refused(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    message: str = answer.json()["error"]
    return message


def test_a_served_run_and_an_agent_are_refused_a_wider_limit_in_the_same_words(
    served: Served, project: str
) -> None:
    with served.client() as client:
        run = client.post("/v1/runs", json={"prompt": "x", "limits": {"max_steps": 6}})
        agent = client.post(
            f"/v1/projects/{project}/agents", json={"name": "wide", "model": {"max_steps": 6}}
        )
    assert _refused(run, 403) == above("limits.max_steps", 6, 5, "max_steps in its config file")
    assert _refused(agent, 403) == above("model.max_steps", 6, 5, "max_steps in its config file")


def test_a_served_sandbox_run_is_held_to_the_paths_logos_serve_allow_gave(
    served: Served, module_home: Home
) -> None:
    outside = module_home.root
    runner = {"kind": "sandbox", "allowed_paths": [{"path": str(outside), "read_only": True}]}
    with served.client() as client:
        answer = client.post("/v1/runs", json={"prompt": "x", "runner": runner})
    assert _refused(answer, 403).startswith(
        f"refused {outside}: it is outside the paths granted to this caller ({module_home.work} "
        "(read-write)); a caller can narrow its paths, never widen them"
    )


def test_sandbox_options_for_local_commands_are_refused_in_the_same_words(
    served: Served, project: str
) -> None:
    local = ": local commands reach the whole machine"
    with served.client() as client:
        run = client.post("/v1/runs", json={"prompt": "x", "runner": {"network": True}})
        agent = client.post(
            f"/v1/projects/{project}/agents",
            json={"name": "local", "runner": {"allowed_hosts": ["pypi.org"]}},
        )
    assert _refused(run, 400).startswith(
        f'allowed_paths, network and allowed_hosts are for the sandbox (runner.kind "sandbox")'
        f"{local}"
    )
    assert _refused(agent, 400) == (
        f'network and allowed_hosts are for the sandbox (runner.kind "sandbox"){local}'
    )


def test_an_agent_asking_a_host_beyond_its_project_is_refused_in_the_same_words(
    served: Served, project: str
) -> None:
    runner = {"kind": "sandbox", "allowed_hosts": ["evil.example"]}
    with served.client() as client:
        agent = client.post(
            f"/v1/projects/{project}/agents", json={"name": "far", "runner": runner}
        )
    assert "host evil.example is not among the project's hosts" in _refused(agent, 403)


@pytest.mark.anyio
async def test_a_logos_mcp_call_is_refused_a_wider_limit_in_the_same_words(
    module_home: Home, model: ScriptedServer
) -> None:
    server = stdio_server(
        "logos",
        "mcp",
        "--model",
        "m",
        "--max-steps",
        "5",
        env=openai_env(module_home, model),
        cwd=module_home.work,
    )
    async with Client(server) as client:
        refused = await client.call_tool("task", {"task": "x", "max_steps": 6})
    assert refused.is_error
    text = refused.content[0].text  # type: ignore[union-attr]
    # WHY endswith: the SDK puts "Error executing tool task: " before a tool's refusal.
    assert text.endswith(above("max_steps", 6, 5, "max_steps in its config file, or --max-steps"))


@pytest.mark.anyio
async def test_a_sandboxd_mcp_call_is_refused_wider_options_in_the_same_words(
    tmp_path: Path,
) -> None:
    server = stdio_server(
        "sandboxd",
        "mcp",
        "--socket",
        str(tmp_path / "nobody-listens.sock"),
        "--allow",
        f"{tmp_path}:rw",
        "--allow-host",
        "pypi.org",
        "--max-timeout",
        "5",
    )
    async with Client(server) as client:
        slow = await client.call_tool("run", {"command": "true", "timeout_s": 6})
        far = await client.call_tool("run", {"command": "true", "hosts": ["evil.example"]})
    texts: list[Any] = [answer.content[0].text for answer in (slow, far)]  # type: ignore[union-attr]
    assert slow.is_error and far.is_error
    assert texts[0].endswith(
        above("timeout_s", 6, 5, "max_timeout in its config file, or --max-timeout")
    )
    assert texts[1].endswith(
        "hosts: host evil.example is not among this server's hosts (pypi.org; allow_host in "
        f"its config file, or --allow-host): {SERVER_RULE}; ask for some of them"
    )


@pytest.mark.anyio
async def test_each_tools_narrowing_arguments_are_its_places_declarations() -> None:
    task = build_task_server(TaskLimits(max_steps=5), _never_runs, "nothing")
    sandbox = build_server(McpLaunch(), one_client=True)
    for server, tool, place in (
        (task, "task", Place.TASK_TOOL),
        (sandbox, "run", Place.SANDBOXD_RUN),
    ):
        [schema] = [t.input_schema for t in await server.list_tools() if t.name == tool]
        declared = {option.name_at(place): option for option in options_at(place)}
        assert set(declared) <= set(schema["properties"])
        for name, option in declared.items():
            assert schema["properties"][name]["description"] == option.help


async def _never_runs(call: object) -> Any:
    raise AssertionError("no call is made")
