"""A run's end as an event (`--json`) and as a trajectory record: one type, two JSON shapes
that stay as they were, so `logos --json` consumers and old trajectories see no change."""

from __future__ import annotations

import json
from pathlib import Path

from logos.approvals.approval import ApprovalDecision
from logos.providers.base import Usage
from logos.records.events import EVENT_ADAPTER, ApprovalEvent, RunSummary
from logos.records.trajectory import PromptRecord, RunHeader, TrajectoryWriter, load_trajectory

SUMMARY = RunSummary(
    stop_reason="max_steps",
    error=None,
    response="the answer",
    usage=Usage(input_tokens=30, output_tokens=4),
    cost_usd=0.25,
    turns=3,
    wall_s=2.5,
    trajectory="/runs/a.jsonl",
)
HEADER = RunHeader(
    logos_version="0.1.0",
    provider="openai",
    model="m",
    base_url="http://127.0.0.1:8080/v1",
    runner="local",
    cwd="/work",
    started_at="2025-01-01T00:00:00.000Z",
    system_prompt="system",
)


def test_the_done_event_keeps_its_fields() -> None:
    event = json.loads(SUMMARY.model_dump_json())
    assert list(event) == [
        "type",
        "stop_reason",
        "error",
        "response",
        "usage",
        "cost_usd",
        "turns",
        "wall_s",
        "trajectory",
    ]
    assert EVENT_ADAPTER.validate_python(event) == SUMMARY


def test_the_done_record_keeps_its_fields_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with TrajectoryWriter.create(path, HEADER) as writer:
        writer.prompt("task")
        writer.approval(ApprovalDecision("no", "rm -rf build", reason="keep it"))
        writer.done(SUMMARY, model="m")
    *_, approval_line, done_line = path.read_text().splitlines()
    record = json.loads(done_line)
    assert list(record) == [
        "type",
        "stop_reason",
        "error",
        "usage",
        "cost_usd",
        "steps",
        "wall_s",
        "model",
        "time",
    ]
    assert (record["steps"], record["model"]) == (3, "m")
    assert list(json.loads(approval_line)) == [
        "type",
        "action",
        "command",
        "edited_command",
        "reason",
        "time",
    ]
    prompt, approval, done = load_trajectory(path).entries
    assert isinstance(prompt, PromptRecord)
    assert isinstance(approval, ApprovalEvent) and approval.reason == "keep it"
    assert done == SUMMARY.model_copy(update={"response": "", "trajectory": None})


def test_a_trajectory_written_before_the_summary_was_shared_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    lines = [
        HEADER.model_dump_json(),
        '{"type": "prompt", "content": "task", "time": "2025-01-01T00:00:00.100Z"}',
        '{"type": "done", "stop_reason": "final", "error": null, "usage": {"input_tokens": 5,'
        ' "output_tokens": 1}, "cost_usd": null, "steps": 2, "wall_s": 1.0, "model": "m",'
        ' "time": "2025-01-01T00:00:09.000Z"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    _, done = load_trajectory(path).entries
    assert isinstance(done, RunSummary)
    assert (done.stop_reason, done.turns, done.usage.input_tokens) == ("final", 2, 5)
