"""A model for batch tests: it runs the command its task names, then answers.

Served by the scripted HTTP server (the `batch_model` fixture), it answers every
conversation by what that conversation holds, so many tasks can talk to it at once in any
order: a task whose prompt has a line `run: COMMAND` gets `<cmd>COMMAND</cmd>` first, then
(once a result came back) a final answer; any other task gets the final answer.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_harness import Home, logos, openai_env, read_jsonl
from tests.support.sandboxd_harness import Daemon
from tests.support.sse_server import RecordedRequest, Reply, ScriptedServer, openai_stream

FINAL_ANSWER = "Done."
RUN_PREFIX = "run: "


@pytest.fixture
def batch_model(sse_server: ScriptedServer) -> ScriptedServer:
    """The scripted model server answering as this model: it runs what each task asks, then
    answers."""
    sse_server.answer_with(run_what_is_asked)
    return sse_server


@pytest.fixture
def project(home: Home) -> Path:
    """The directory `project_task`'s tasks copy: one file, hello.txt."""
    project = home.work / "project"
    project.mkdir()
    (project / "hello.txt").write_text("hello\n")
    return project


def run_what_is_asked(request: RecordedRequest) -> Reply:
    messages = [m for m in request.json["messages"] if m["role"] != "system"]
    texts = [_text(m["content"]) for m in messages]
    command = next(
        (line[len(RUN_PREFIX) :] for line in texts[0].splitlines() if line.startswith(RUN_PREFIX)),
        None,
    )
    if command is None or any("<result>" in text for text in texts[1:]):
        return openai_stream(FINAL_ANSWER)
    return openai_stream(f"Running it.\n<cmd>{command}</cmd>\n")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def project_task(id: str, prompt: str, **fields: str) -> dict[str, Any]:
    """A task that works in a fresh copy of the directory `project`; `fields` are its other
    fields (check, setup, image…)."""
    return {"id": id, "prompt": prompt, "workspace": {"copy": "project"}, **fields}


def write_tasks(home: Home, *tasks: dict[str, Any] | str) -> Path:
    """tasks.jsonl in the home's work directory: each task as a JSON line (a str is written
    as it is: a bad line)."""
    path = home.work / "tasks.jsonl"
    lines = [task if isinstance(task, str) else json.dumps(task) for task in tasks]
    path.write_text("\n".join(lines) + "\n")
    return path


def passed_results(home: Home, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The lines of the batch's results.jsonl, checked: one for each task of `ids`, each
    passed."""
    lines = read_jsonl(home.work / "out" / "results.jsonl")
    assert sorted(line["id"] for line in lines) == sorted(ids)
    assert all(line["status"] == "passed" for line in lines), lines
    return lines


def sandboxed_batch(
    home: Home,
    server: ScriptedServer,
    tasks: Path,
    daemon: Daemon,
    *args: str,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """`logos batch TASKS --out out --sandbox` through `daemon`, the model served by
    `server`; `args` are its other flags."""
    return logos(
        [
            *("batch", "--model", "m", str(tasks), "--out", "out"),
            *("--sandbox", "--socket", str(daemon.socket), *args),
        ],
        home,
        openai_env(home, server),
        timeout=timeout,
    )
