"""One run's assembly (logos.assembly), as every front uses it: a scripted model, real bash,
real trajectory and audit files; what fails to open, what is cancelled and what hangs
still leaves nothing open and the run on the record."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from pydantic import BaseModel

import logos.closing
from logos.approvals.approval import AutoApprover
from logos.assembly import Approval, RunAssembly, RunParts
from logos.errors import RecordFileError
from logos.jsonl import utc_now
from logos.records.events import RunEvents
from logos.records.trajectory import RunHeader, TrajectoryWriter
from logos.runners.local import LocalRunner
from tests.support.processes import open_fds, processes_matching, until_gone
from tests.support.scripted import Reply, ScriptedProvider, config_for

pytestmark = pytest.mark.anyio


class Bash(LocalRunner):
    """Real local bash that says whether it was closed."""

    closed = False

    async def aclose(self) -> None:
        await super().aclose()
        self.closed = True


class HangingBash(Bash):
    """Bash whose close never returns: a runner stuck ending its session."""

    async def aclose(self) -> None:
        await anyio.sleep_forever()


class Model(ScriptedProvider):
    closed = False

    async def aclose(self) -> None:
        self.closed = True


class Events(RunEvents):
    """Keeps the run's events, as a server's event log would publish them."""

    def __init__(self) -> None:
        self.seen: list[BaseModel] = []
        super().__init__(self.seen.append)

    @property
    def types(self) -> list[str]:
        return [str(getattr(event, "type", "")) for event in self.seen]


def left_open(before: set[int]) -> dict[int, str]:
    """The descriptors opened since `before` and still open, with what each points at.
    WHY not equality: the garbage collector may close an earlier test's meanwhile."""
    found = {}
    for fd in open_fds() - before:
        with contextlib.suppress(OSError):
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return found


def header(tmp_path: Path) -> RunHeader:
    return RunHeader(
        logos_version="0.1.0",
        provider="openai",
        model="scripted-model",
        base_url="http://127.0.0.1:1/v1",
        runner="local",
        cwd=str(tmp_path),
        started_at=utc_now(),
        system_prompt="test system prompt",
    )


def parts(
    tmp_path: Path,
    model: Model,
    runner: Callable[[], LocalRunner],
    events: RunEvents,
    **changes: Any,
) -> RunParts:
    fields: dict[str, Any] = {
        "config": config_for(model),
        "prompt": "count the files",
        "history": [],
        "open_runner": runner,
        "open_trajectory": lambda: TrajectoryWriter.create(
            tmp_path / "run.jsonl", header(tmp_path)
        ),
        "observer": events,
        "approval": Approval("auto", AutoApprover(), tmp_path / "state" / "audit.jsonl"),
        "runner_kind": "local",
        "cwd": str(tmp_path),
        "closes_provider": True,
    }
    fields.update(changes)
    return RunParts(**fields)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_run_is_announced_recorded_audited_and_closed(tmp_path: Path) -> None:
    before = open_fds()
    model = Model([Reply("<cmd>echo one</cmd>"), Reply("One file.")])
    bash, events = Bash(), Events()
    assembly = await RunAssembly.open(parts(tmp_path, model, lambda: bash, events))
    summary = await assembly.run()

    assert (summary.stop_reason, summary.response, summary.turns) == ("final", "One file.", 2)
    assert summary.trajectory == str(tmp_path / "run.jsonl") == str(assembly.trajectory)
    assert assembly.summary == summary
    assert events.types[0] == "start" and events.types[-1] == "done"
    assert "approval" in events.types and "command_result" in events.types
    kinds = [record["type"] for record in records(tmp_path / "run.jsonl")]
    assert kinds == ["run", "prompt", "approval", "step", "step", "step", "done"]
    (audited,) = records(tmp_path / "state" / "audit.jsonl")
    assert (audited["action"], audited["command"]) == ("auto", "echo one")
    assert audited["trajectory"] == str(tmp_path / "run.jsonl")
    assert bash.closed and model.closed
    assert left_open(before) == {}
    await assembly.aclose()  # a run closes its own: closing again does nothing
    with pytest.raises(RuntimeError, match="open another"):
        await assembly.run()


async def test_a_run_without_approvals_keeps_its_callers_runner_open(tmp_path: Path) -> None:
    """A batch task's: nothing asked or audited, and its check runs on the runner after."""
    model = Model([Reply("<cmd>echo one</cmd>"), Reply("done")])
    bash = Bash()
    assembly = await RunAssembly.open(
        parts(
            tmp_path,
            model,
            lambda: bash,
            Events(),
            approval=None,
            closes_runner=False,
            closes_provider=False,
        )
    )
    assert (await assembly.run()).stop_reason == "final"
    assert not bash.closed and not model.closed
    assert not (tmp_path / "state").exists()
    assert "approval" not in [record["type"] for record in records(tmp_path / "run.jsonl")]
    after = await bash.run("echo still here", config_for(model).exec_options)
    assert after.stdout == "still here\n"
    await bash.aclose()


Failing = Literal["runner", "audit log", "trajectory"]


@pytest.mark.parametrize("failing", ["runner", "audit log", "trajectory"])
async def test_a_part_that_fails_to_open_closes_those_opened_before_it(
    tmp_path: Path, failing: Failing
) -> None:
    (tmp_path / "run.jsonl").write_text("another run's\n")
    (tmp_path / "a file").write_text("")
    opened: list[Bash] = []

    def runner() -> Bash:
        if failing == "runner":
            raise ValueError("no such sandbox")
        opened.append(Bash())
        return opened[-1]

    def trajectory() -> TrajectoryWriter:
        name = "run.jsonl" if failing == "trajectory" else "new.jsonl"
        return TrajectoryWriter.create(tmp_path / name, header(tmp_path))

    audit_log = tmp_path / ("a file" if failing == "audit log" else "state") / "audit.jsonl"
    model = Model([])
    before = open_fds()
    with pytest.raises((ValueError, RecordFileError, FileExistsError)):
        await RunAssembly.open(
            parts(
                tmp_path,
                model,
                runner,
                Events(),
                open_trajectory=trajectory,
                approval=Approval("auto", AutoApprover(), audit_log),
            )
        )
    assert left_open(before) == {}
    assert all(bash.closed for bash in opened) and model.closed
    assert not (tmp_path / "new.jsonl").exists()  # a run that cannot be audited leaves none
    assert (tmp_path / "state").exists() == (failing == "trajectory")
    assert (tmp_path / "run.jsonl").read_text() == "another run's\n"


async def test_a_run_opened_but_never_run_is_closed_without_a_prompt(tmp_path: Path) -> None:
    before = open_fds()
    model, bash = Model([]), Bash()
    assembly = await RunAssembly.open(parts(tmp_path, model, lambda: bash, Events()))
    await assembly.aclose()
    assert bash.closed and model.closed and left_open(before) == {}
    assert [record["type"] for record in records(tmp_path / "run.jsonl")] == ["run"]


@pytest.mark.parametrize("how", ["cancel event", "cancel scope"])
async def test_a_run_cancelled_in_the_middle_records_what_it_spent(
    tmp_path: Path, how: str
) -> None:
    marker = f"sleep {100_000 + secrets.randbelow(900_000)}"  # WHY: bash execs it as it is
    model = Model([Reply(f"<cmd>{marker}</cmd>")])
    bash, before = Bash(), open_fds()
    running = anyio.Event()

    class Watching(Events):
        def command_start(self, turn: int, index: int, command: str) -> None:
            super().command_start(turn, index, command)
            running.set()

    events = Watching()
    assembly = await RunAssembly.open(parts(tmp_path, model, lambda: bash, events))
    cancel = anyio.Event()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:

            async def stop_when_running() -> None:
                await running.wait()
                await until_appears(marker)
                if how == "cancel event":
                    cancel.set()
                else:
                    group.cancel_scope.cancel()

            group.start_soon(stop_when_running)
            await assembly.run(cancel)
            group.cancel_scope.cancel()
        await until_gone(marker)

    summary = assembly.summary
    assert summary is not None and summary.stop_reason == "canceled"
    assert (summary.turns, summary.usage.input_tokens, summary.usage.output_tokens) == (1, 100, 20)
    done = records(tmp_path / "run.jsonl")[-1]
    assert (done["type"], done["stop_reason"], done["steps"]) == ("done", "canceled", 1)
    assert events.types[-1] == "done"
    assert bash.closed and model.closed and left_open(before) == {}


async def until_appears(marker: str) -> None:
    while not processes_matching(marker):
        await anyio.sleep(0.02)


async def test_a_runner_whose_close_hangs_holds_the_run_only_as_long_as_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logos.closing, "CLOSE_TIMEOUT_S", 0.5)
    model, bash, before = Model([Reply("Nothing to run.")]), HangingBash(), open_fds()
    assembly = await RunAssembly.open(parts(tmp_path, model, lambda: bash, Events()))
    started = time.monotonic()
    with anyio.fail_after(10):
        summary = await assembly.run()
    assert 0.5 <= time.monotonic() - started < 5
    assert summary.stop_reason == "final"
    assert model.closed  # closed after the runner's close gave up, not instead of it
    done = records(tmp_path / "run.jsonl")[-1]
    assert (done["type"], done["stop_reason"]) == ("done", "final")
    assert left_open(before) == {}
