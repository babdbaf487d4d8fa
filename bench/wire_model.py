"""A scripted model over real HTTP, in OpenAI's streaming wire format, for the batch benchmark.

`logos batch` runs in its own process (and on Ray's workers), so its model must be reachable
over the network, as a real one would be. Every conversation gets the same two turns: one
`<cmd>true</cmd>` block, then (once a `<result>` came back) a final answer. It answers at
once, so what is measured is logos, not a model.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMAND_REPLY = "<cmd>true</cmd>\n"
FINAL_REPLY = "Done."
MODEL = "bench-wire"
API_KEY = "bench-key"
"""Sent by the clients and never checked: the provider needs one."""


class WireModel:
    """The server on 127.0.0.1 (a free port); start and stop it with `with`."""

    def __init__(self) -> None:
        handler = type("_BoundHandler", (_Handler,), {"model": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._lock = threading.Lock()
        self._requests = 0

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API's address (what `--base-url` takes)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    def __enter__(self) -> WireModel:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _counted(self) -> None:
        with self._lock:
            self._requests += 1


def reply_for(body: Any) -> str:
    """The command first; the final answer once a result came back.

    WHY only the user's turns, and only their start: the system prompt explains the
    `<result>` envelope, so a search of every message would find one before any command ran
    (and every task would end at once, its command never run)."""
    turns = [
        str(message.get("content", ""))
        for message in body.get("messages", ())
        if message.get("role") == "user"
    ]
    came_back = any(turn.startswith("<result>") for turn in turns)
    return FINAL_REPLY if came_back else COMMAND_REPLY


def stream_events(text: str) -> bytes:
    """The whole reply as OpenAI streams it: the text, the finish, the usage, [DONE]."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": MODEL}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 500, "completion_tokens": 5}},
    ]
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return ("".join(events) + "data: [DONE]\n\n").encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: clients close idle keep-alive connections at will."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model: WireModel

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the benchmark's output is its table."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.model._counted()
        payload = stream_events(reply_for(body))
        self.send_response_only(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()
