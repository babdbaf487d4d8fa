"""`python -m bench.serve_server STATE_DIR`: the real `logos serve` server (uvicorn, the app,
runs, event logs) with a scripted in-process model, for the `serve` family.

The model answers by the prompt: "stamp N INTERVAL DELAY" streams N deltas after DELAY
seconds, each holding the time.monotonic() at which it was produced (the client computes
the latency when it reads it); "work" runs `<cmd>true</cmd>` then answers; "wait" asks to
run a command (left waiting for an approval nobody gives); "hello" answers at once, and so
does a project's agent (its prompt ends "It is your turn…"). A benchmark double, never
shipped.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio

from logos.access.token_file import load_or_create_token
from logos.agent.config import Config
from logos.commands.memory_store import MemoryStore
from logos.options import ExecOptions
from logos.protocol.prompt import build_system_prompt
from logos.providers.base import (
    Finish,
    ModelRequest,
    OnRetry,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from logos.records.trajectory import Trajectory
from logos.runners.base import Runner
from logos.runners.local import LocalRunner
from logos.serve.server import bind_tcp, serve
from logos.serve.setup import ModelInfo, RunnerChoice, ServerSetup
from logos.settings.serve_table import ServeSettings

MAX_RUNS = 128


class BenchModel:
    """Replies chosen by the run's first prompt (see the module docstring)."""

    name = "scripted"
    model = "bench-scripted"
    context_window: int | None = 1_000_000

    async def stream(
        self, request: ModelRequest, on_retry: OnRetry | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        prompt = request.messages[0].content.split()
        if "It is your turn" in request.messages[-1].content:
            yield TextDelta("Noted.")  # a project's agent (bench.projects)
        elif prompt[0] == "hello":
            yield TextDelta("Hello.")
        elif prompt[0] == "stamp":
            count, interval = int(prompt[1]), float(prompt[2])
            await anyio.sleep(float(prompt[3]))
            for _ in range(count):
                await anyio.sleep(interval)
                yield TextDelta(f"{time.monotonic():.9f}\n")
        elif prompt[0] == "work":
            yield TextDelta("Done." if len(request.messages) > 1 else "<cmd>true</cmd>")
        else:
            yield TextDelta("Waiting for you.\n<cmd>true</cmd>")
        yield UsageReport(Usage(input_tokens=10, output_tokens=10))
        yield Finish("stop")

    async def aclose(self) -> None:
        """Nothing to close: no connection."""


class LocalOnly:
    """The bench server's runners: local bash only."""

    def problem(self, choice: RunnerChoice) -> str | None:
        return "this bench server runs local commands only" if choice.sandbox else None

    def open(self, choice: RunnerChoice) -> Runner:
        return LocalRunner()

    def system_prompt(
        self, choice: RunnerChoice, options: ExecOptions, continued: Trajectory | None
    ) -> str:
        return build_system_prompt(working_dir=options.resolved_workdir())


def main(state_dir: Path) -> None:
    token, _ = load_or_create_token(state_dir / "token")
    listener = bind_tcp("127.0.0.1", 0, allow_remote=False)
    setup = ServerSetup(
        settings=ServeSettings(
            max_concurrent_runs=MAX_RUNS, allow_local_auto=True, max_connections=4 * MAX_RUNS
        ),
        template=Config(provider=BenchModel(), max_steps=5),
        # WHY "openai": sessions record a provider kind of the registry; the scripted model
        # stands in for an OpenAI-compatible server.
        model=ModelInfo("openai", BenchModel.model, None, None),
        runners=LocalOnly(),
        state_dir=state_dir,
        audit_path=state_dir / "audit.jsonl",
        memory=MemoryStore(state_dir / "memory.json"),
        rules=None,
        logos_version="bench",
        workdir=os.getcwd(),
    )

    def ready() -> None:
        print(f"serving on {listener.url}", flush=True)

    anyio.run(serve, setup, token, listener, ready)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
