"""The first look check: a look that missed its README, while the listing shows a manifest,
is answered with the command that reads it, and the next turn must act."""

from __future__ import annotations

import pytest

from logos.agent.checks.first_look import FirstLook
from logos.agent.checks.reply import Reply
from logos.protocol.notices import list_instead_notice, missing_look_notice
from logos.result import Result
from tests.support.checks import ran, run_state

pytestmark = pytest.mark.anyio
LISTING = ran("ls", stdout="package.json\nserver.js\n")
NO_README = Result(
    command="head -n 40 README.md",
    stderr="head: cannot open 'README.md' for reading: No such file or directory\n",
    exit_code=1,
)
LOOK = Reply(blocks=2, results=(LISTING, NO_README))


async def test_a_missed_readme_hands_over_the_manifest_once() -> None:
    check = FirstLook()
    run = run_state(results=[LISTING, NO_README], acted=True, answer_due=True)
    assert await check.check(LOOK, run) == missing_look_notice("README.md", "package.json")
    assert not run.acted and not run.answer_due
    run.acted = True
    assert await check.check(LOOK, run) is None and run.acted
    # Having read the README it was handed, it is not sent on to the manifest.
    run.results.append(ran("head -n 40 package.json", stdout="{}"))
    run.results.insert(0, ran("ls", stdout="Makefile\npackage.json\n"))
    assert await check.check(LOOK, run) is None


async def test_a_reply_that_ran_nothing_or_found_its_readme_is_let_be() -> None:
    assert await FirstLook().check(Reply(answer="Done."), run_state()) is None
    found = ran("head -n 40 README.md", stdout="# shortener\n")
    reply = Reply(blocks=2, results=(LISTING, found))
    assert await FirstLook().check(reply, run_state(results=[LISTING, found])) is None


async def test_a_second_miss_of_another_name_is_answered_too() -> None:
    task = "What is the first line of readme.txt?"
    check, run = FirstLook(), run_state(task=task, results=[NO_README])
    assert await check.check(LOOK, run) == missing_look_notice("README.md", "readme.txt")
    upper = Result(
        command="head -n 40 README.txt",
        stderr="head: cannot open 'README.txt' for reading: No such file or directory\n",
        exit_code=1,
    )
    run.results.append(upper)
    again = Reply(blocks=1, results=(upper,))
    case = missing_look_notice("README.txt", "readme.txt")
    assert await check.check(again, run) == case
    assert "upper and lower case" in case and "<cmd>head -n 40 readme.txt</cmd>" in case
    assert await check.check(again, run) is None  # each missed name once


async def test_with_nothing_to_read_instead_the_directory_the_task_names_is_handed_over() -> None:
    task = "Which file in the logs directory is the largest?"
    listing = ran("ls", stdout="logs\n")
    check, run = FirstLook(), run_state(task=task, results=[listing, NO_README], acted=True)
    look = Reply(blocks=2, results=(listing, NO_README))
    assert await check.check(look, run) == list_instead_notice("README.md", "logs")
    assert "<cmd>ls -l logs</cmd>" in list_instead_notice("README.md", "logs")
    assert not run.acted
    assert await check.check(look, run) is None  # once
