"""The grounded facts check: an answer naming a framework no output showed sends the model
to read the manifest a listing shows, or is asked once more to name only what they show."""

from __future__ import annotations

import pytest

from logos.agent.checks.base import AskAgain
from logos.agent.checks.grounded_facts import GroundedFacts
from logos.agent.checks.reply import Reply
from logos.protocol.notices import read_instead_notice, unshown_facts_note
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
LISTING = ran("ls", stdout="package.json\nserver.js\n")
REACT = Reply(answer="JavaScript with React.")


async def test_an_invented_framework_sends_the_model_to_the_unread_manifest() -> None:
    check, run = GroundedFacts(), run_state(results=[LISTING], acted=True, answer_due=True)
    with pytest.raises(AskAgain) as asked:
        await check.check(REACT, run)
    assert asked.value.notice == read_instead_notice("React", "package.json")
    assert not run.acted and not run.answer_due


async def test_with_nothing_left_to_read_the_answer_is_asked_again_once() -> None:
    read = ran("cat package.json", stdout='{"dependencies": {"express": "^4"}}')
    check, run = GroundedFacts(), run_state(results=[LISTING, read])
    with pytest.raises(AskAgain) as asked:
        await check.check(REACT, run)
    assert asked.value.notice == unshown_facts_note("React")
    assert run.answer_due and run.answer_notes == [unshown_facts_note("React")]
    assert await check.check(REACT, run) is None


async def test_facts_the_outputs_or_the_task_show_pass() -> None:
    read = ran("cat package.json", stdout='{"dependencies": {"express": "^4"}}')
    run = run_state(results=[LISTING, read])
    assert await GroundedFacts().check(Reply(answer="JavaScript with Express."), run) is None
    asked = run_state(task="is this a React app?", results=[LISTING, read])
    assert await GroundedFacts().check(Reply(answer="No, not React."), asked) is None
