"""The example task file the README runs (examples/tasks.jsonl): every line is a valid task,
and every check judges: it fails on the untouched workspace and passes once the task is done
(a known solution, run with real bash in a real copy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos.batch.tasks import TaskSpec, read_task_file
from logos.batch.workspace import make_workspace
from logos.options import ExecOptions
from logos.runners.local import LocalRunner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOLUTIONS = {
    "fix-add": "python3 -c \"import pathlib; p = pathlib.Path('calc.py'); "
    "p.write_text(p.read_text().replace('a - b', 'a + b'))\"",
    "count-sandbox": "echo 2 > count.txt",
    "rename-greeting": "mv hello.txt greeting.txt && echo goodbye >> greeting.txt",
}


def example_tasks() -> tuple[TaskSpec, ...]:
    task_file = read_task_file(EXAMPLES / "tasks.jsonl")
    assert task_file.problems == ()
    return task_file.tasks


def test_the_example_file_has_only_valid_tasks_with_checks() -> None:
    tasks = example_tasks()
    assert {task.id for task in tasks} == set(SOLUTIONS)
    assert all(task.check is not None for task in tasks)


@pytest.mark.anyio
@pytest.mark.parametrize("task", example_tasks(), ids=lambda task: task.id)
async def test_each_check_fails_before_the_work_and_passes_after_it(
    task: TaskSpec, tmp_path: Path
) -> None:
    workspace = tmp_path / task.id
    await make_workspace(task.workspace, workspace)
    options = ExecOptions(workdir=str(workspace))
    async with LocalRunner() as runner:
        if task.setup is not None:
            assert (await runner.run(task.setup, options)).ok
        assert task.check is not None
        before = await runner.run(task.check, options)
        assert not before.ok, "the check passes on the untouched workspace: it judges nothing"
        assert (await runner.run(SOLUTIONS[task.id], options)).ok
        after = await runner.run(task.check, options)
        assert after.ok, after.stderr
