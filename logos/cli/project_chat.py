"""A project's chat as lines in a terminal: each message by its author, an agent's reply
streamed as it comes with its commands inside it, routing, approvals and guards as notes."""

from __future__ import annotations

import shlex
from typing import IO, Any


class ChatPrinter:
    def __init__(self, out: IO[str], project: str) -> None:
        self._out = out
        self._project = shlex.quote(project)
        """The project as the commands it suggests name it (as the person named it)."""
        self._streaming: str | None = None
        """The message whose deltas are being printed."""

    def _line(self, text: str) -> None:
        if self._streaming is not None:
            self._out.write("\n")
            self._streaming = None
        self._out.write(text + "\n")
        self._out.flush()

    def show(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "message":
            if data["kind"] == "user":
                self._line(f"you: {data['text']}")
            elif data["kind"] == "briefing":
                self._line(f"· briefed {data['to']} ({len(data['text'].splitlines())} lines)")
            else:
                self._line(f"· {data['text']}")
        elif kind == "routing" and data.get("agent"):
            self._line(f"→ {data['agent']} ({data['reason']})")
        elif kind == "message_start":
            self._line(f"{data['author']}:")
        elif kind == "delta":
            self._out.write(data["text"])
            self._out.flush()
            self._streaming = data["message"]
        elif kind == "command":
            self._command(data["event"])
        elif kind == "message_end" and data["status"] != "complete":
            self._line(f"[{data['author']}'s message {data['status']}: {data['reason']}]")
        elif kind == "approval_required":
            self._line(
                f"? {data['agent']} wants to run: {data['summary']}\n"
                f"  approve: logos project approve {self._project} {data['id']} [--deny] [--always]"
            )
        elif kind == "approval_decided" and data["action"] != "auto":  # WHY: auto is the rule
            reason = f" ({data['reason']})" if data.get("reason") else ""
            self._line(f"· {data['action']}: {data['command']}{reason}")
        elif kind == "guard":
            self._line(
                f"! {data['reason']}\n"
                f"  answer: logos project guard {self._project} continue | stop | pick AGENT"
            )
        elif kind == "turn" and data["state"] != "started":
            self._line(
                f"— turn {data['state']}" + (f": {data['reason']}" if data["reason"] else "")
            )
        elif kind == "agent" and data["change"] not in ("busy", "idle"):
            self._line(f"· {data['agent']} ({data['role']}) {data['change']}")

    def _command(self, event: dict[str, Any]) -> None:
        if event["type"] == "command_start":
            self._line(f"  $ {event['command']}")
        elif event["type"] == "command_result":
            result = event["result"]
            output = (result.get("stdout") or "") + (result.get("stderr") or "")
            for line in output.splitlines()[:20]:
                self._line(f"  │ {line}")
            code = result.get("exit_code")
            self._line(f"  └ exit {code}" if code is not None else "  └ did not finish")
