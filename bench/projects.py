"""Family `projects`: what a project adds between the person's message and its answer.

The real server (`bench.serve_server`, a scripted in-process model that answers at once)
runs in a child process; this process is the client over loopback HTTP, reading the
project's real server-sent event stream. A project of `projects_agents` agents is given
`projects_history` messages of chat first (the person's and the captain's answers), then:

- message → routing event, → first delta of the answer, → the turn's end, for messages to
  the captain; the turn against its baseline, a plain run (`POST /v1/runs`, one model reply,
  no command) on the same server and model, POST → done;
- the same for a message to each talon that never spoke (its context is the whole chat,
  bounded, with the omitted messages counted);
- routing overhead alone, in this process: deciding who answers and building its context
  (`route_user_message` + `context_for`) over a chat of that size, per message.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio
import httpx

from bench.plan import Plan
from bench.results import MEASURE_HEADERS, Section, Series, SeriesGroup, measure_row
from bench.serve import bench_server, run_events, sse_events
from logos.serve.projects.context import context_for
from logos.serve.projects.routing import route_user_message
from logos.serve.projects.wire import ChatEntry

FAMILY = "projects"
TITLE = "projects: message → first event and routing overhead (10 agents, long history)"
PURE_REPEATS = 200
_TURN_TIMEOUT_S = 60.0


class _Stream:
    """The project's events as they arrive, each with the time its data line was read."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any], float]] = []
        self.changed = anyio.Event()

    async def read(self, client: httpx.AsyncClient, project: str) -> None:
        async for event in sse_events(client, f"/v1/projects/{project}/events"):
            self.events.append(event)
            self.changed.set()
            self.changed = anyio.Event()

    async def turn_of(self, message: str, start: int) -> list[tuple[str, dict[str, Any], float]]:
        """The events from index `start` until `message`'s turn ends."""
        with anyio.fail_after(_TURN_TIMEOUT_S):
            while True:
                for at in range(start, len(self.events)):
                    kind, data, _ = self.events[at]
                    if kind == "turn" and data["message"] == message and data["state"] != "started":
                        return self.events[start : at + 1]
                await self.changed.wait()


async def run(plan: Plan) -> Section:
    problems: list[str] = []
    async with bench_server("logos-bench-projects-", problems) as (client, _):
        measured = await _measure(client, plan, problems)
    pure_s = _pure_routing(plan.projects_history, plan.projects_agents)
    return _section(plan, measured, pure_s, problems)


async def _measure(
    client: httpx.AsyncClient, plan: Plan, problems: list[str]
) -> dict[str, list[float]]:
    made = await client.post("/v1/projects", json={"name": "bench", "goal": "answer"})
    project = made.json()["id"]
    talons = [f"talon-{n}" for n in range(1, plan.projects_agents)]
    for name, role in [("captain", "captain"), *((t, "talon") for t in talons)]:
        added = await client.post(
            f"/v1/projects/{project}/agents", json={"name": name, "role": role}
        )
        if added.status_code != 201:
            problems.append(f"adding {name} answered {added.status_code}: {added.text}")
    figures: dict[str, list[float]] = {
        "route": [],
        "delta": [],
        "turn": [],
        "fresh_route": [],
        "fresh_delta": [],
        "fresh_turn": [],
        "plain": [],
    }
    stream = _Stream()
    async with anyio.create_task_group() as group:
        group.start_soon(stream.read, client, project)
        for number in range(plan.projects_history // 2):
            await _send(client, stream, project, f"history message {number}", problems)
        for number in range(plan.projects_messages):
            took = await _send(client, stream, project, f"measured {number}", problems)
            if took is not None:
                for key, value in zip(("route", "delta", "turn"), took, strict=True):
                    figures[key].append(value)
        for talon in talons:
            took = await _send(client, stream, project, f"@{talon} your first word", problems)
            if took is not None:
                for key, value in zip(
                    ("fresh_route", "fresh_delta", "fresh_turn"), took, strict=True
                ):
                    figures[key].append(value)
        for _ in range(plan.projects_messages):
            started = time.monotonic()
            answer = await client.post(
                "/v1/runs", json={"prompt": "hello", "approval": "never-run"}
            )
            await run_events(client, answer.json()["run"])
            figures["plain"].append(time.monotonic() - started)
        group.cancel_scope.cancel()
    return figures


async def _send(
    client: httpx.AsyncClient, stream: _Stream, project: str, text: str, problems: list[str]
) -> tuple[float, float, float] | None:
    """(→ routing, → first delta, → turn end) of one message, in seconds."""
    start = len(stream.events)
    started = time.monotonic()
    answer = await client.post(f"/v1/projects/{project}/messages", json={"text": text})
    if answer.status_code != 202:
        problems.append(f"a message answered {answer.status_code}: {answer.text}")
        return None
    events = await stream.turn_of(answer.json()["message"], start)
    end = events[-1]
    if end[1]["state"] != "answered":
        problems.append(f"a turn ended {end[1]['state']}: {end[1]['reason']}")
        return None
    routed = next(at for kind, _, at in events if kind == "routing")
    delta = next(at for kind, _, at in events if kind == "delta")
    return routed - started, delta - started, end[2] - started


def _pure_routing(history: int, agents: int) -> list[float]:
    names = ["captain", *(f"talon-{n}" for n in range(1, agents))]
    chat = [
        ChatEntry(
            seq=seq,
            id=str(seq),
            author="user" if seq % 2 else "captain",
            text=f"message {seq}: " + "words of the chat " * 8,
            commands=[] if seq % 2 else ["`make test` → exit 0"],
        )
        for seq in range(1, history + 1)
    ]
    took = []
    for repeat in range(PURE_REPEATS):
        target = names[1 + repeat % (agents - 1)]
        started = time.perf_counter()
        decision = route_user_message(
            f"@{target} go on", agents=names, available=names, captain="captain", listening=None
        )
        context_for({str(decision.agent)}, chat, since=0, upto=history, max_tokens=4_000)
        took.append(time.perf_counter() - started)
    return took


def _section(
    plan: Plan, figures: dict[str, list[float]], pure_s: list[float], problems: list[str]
) -> Section:
    history, agents = plan.projects_history, plan.projects_agents
    turn, plain = figures["turn"], figures["plain"]
    ratio = (
        f"{statistics.median(turn) / statistics.median(plain):.2f}x the plain run"
        if turn and plain
        else ""
    )
    rows = (
        measure_row("message → routing event (to the captain)", figures["route"]),
        measure_row("message → first delta of the answer", figures["delta"]),
        measure_row("message → turn end (one model reply)", turn, ratio),
        measure_row("baseline: plain run, POST → done (one model reply)", plain),
        measure_row("fresh talon (whole chat as context): → routing", figures["fresh_route"]),
        measure_row("fresh talon: → first delta", figures["fresh_delta"]),
        measure_row(f"routing + context alone, in process ({history} messages)", pure_s),
    )
    return Section(
        family=FAMILY,
        title=TITLE,
        headers=MEASURE_HEADERS,
        rows=rows,
        groups=(
            SeriesGroup(
                "projects: message → first delta",
                (
                    Series("to the captain", tuple(figures["delta"])),
                    Series("to a fresh talon", tuple(figures["fresh_delta"])),
                ),
            ),
        ),
        notes=(
            f"{agents} agents, {history} messages of chat before the measured ones; the model "
            "is scripted in the server's process and answers at once, so only logos is "
            "measured; every event is written to the project's log (and the project's state "
            "file replaced) before it is sent; server and client share the machine's cores",
        ),
        problems=tuple(problems),
        raw={**figures, "pure_s": pure_s},
    )
