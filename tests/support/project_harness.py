"""Projects on a real `logos serve`: make one, add agents, send messages and read the
project's event stream until a turn ends (real HTTP, real SSE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.serve_harness import Received, read_stream

ENDED = ("answered", "held", "stopped", "failed", "budget", "interrupted", "no-agent")


@dataclass
class ProjectClient:
    client: httpx.Client
    id: str
    seen: int = 0
    """The id of the last event read."""

    @classmethod
    def create(cls, client: httpx.Client, **body: Any) -> ProjectClient:
        response = client.post("/v1/projects", json={"name": "demo", **body})
        assert response.status_code == 201, response.text
        return cls(client, response.json()["id"])

    @property
    def path(self) -> str:
        return f"/v1/projects/{self.id}"

    def add(self, name: str, role: str = "talon", **body: Any) -> dict[str, Any]:
        response = self.client.post(
            f"{self.path}/agents", json={"name": name, "role": role, **body}
        )
        assert response.status_code == 201, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def send(self, text: str) -> dict[str, Any]:
        response = self.client.post(f"{self.path}/messages", json={"text": text})
        assert response.status_code == 202, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def ask(self, text: str) -> list[Received]:
        """Send `text`, then read the events up to the end of the turn that ends next."""
        self.send(text)
        return self.turn()

    def streaming(self, text: str) -> dict[str, Any]:
        """Send `text`, then read the events up to the first delta: an agent is replying."""
        answer = self.send(text)
        self.events_until(lambda e: e.type == "delta")
        return answer

    def status(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.get(self.path).json()
        return answer

    def events_until(self, accept: Any) -> list[Received]:
        """The events after those read already, up to the first `accept` takes."""
        events = read_stream(
            self.client, f"{self.path}/events", last_event_id=self.seen, until=accept
        )
        if events:
            self.seen = events[-1].id
        return events

    def turn_notes(self) -> list[Received]:
        """The events up to the next note of logos's."""
        return self.events_until(lambda e: e.type == "message" and e.data["kind"] == "note")

    def turn(self) -> list[Received]:
        """The events up to the end of the next turn that ends."""
        return self.events_until(lambda e: e.type == "turn" and e.data["state"] in ENDED)


def of_type(events: list[Received], kind: str) -> list[dict[str, Any]]:
    return [event.data for event in events if event.type == kind]


def notes(events: list[Received]) -> list[str]:
    return [e["text"] for e in of_type(events, "message") if e["kind"] == "note"]


def replies(events: list[Received]) -> list[tuple[str, str, str]]:
    """(author, status, text) of each agent's message."""
    return [(e["author"], e["status"], e["text"]) for e in of_type(events, "message_end")]
