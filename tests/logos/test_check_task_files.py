"""The task files check: an answer before any command wrote the file the task asks for is
told so once, and the next turn must act."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.reply import Reply
from logos.agent.checks.task_files import TaskFiles
from logos.protocol.notices import unwritten_file_notice
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
TASK = "Create a file count.txt that contains the number of words in essay.txt."
COUNTED = ran("wc -w essay.txt", stdout="14 essay.txt\n")


async def test_an_answer_before_the_file_is_written_is_sent_back_to_act_once() -> None:
    check = TaskFiles()
    run = run_state(task=TASK, results=[COUNTED], acted=True, answer_due=True)
    with pytest.raises(AskAgain) as asked:
        await check.check(Reply(answer="14 essay.txt"), run)
    assert asked.value.notice == unwritten_file_notice("count.txt", "wc -w < essay.txt > count.txt")
    assert not run.acted and not run.answer_due
    assert await check.check(Reply(answer="14 essay.txt"), run) is None


async def test_once_written_or_with_no_file_asked_the_answer_passes() -> None:
    wrote = ran("wc -w < essay.txt > count.txt")
    run = run_state(task=TASK, results=[COUNTED, wrote])
    assert await TaskFiles().check(Reply(answer="Done."), run) is None
    other = run_state(task="How many words are in essay.txt?", results=[COUNTED])
    assert await TaskFiles().check(Reply(answer="14"), other) is None
