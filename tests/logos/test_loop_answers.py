"""A small model's answer keeps the form its task asks for and names only what the outputs
show, through the real loop with a scripted model and real bash; a frontier model's answer
is taken as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos import run
from logos.agent.config import Config
from logos.agent.replies import SMALL_MODEL, ReplyPolicy
from logos.options import AllowedPath, ExecOptions
from logos.protocol.answer_form import AnswerForm
from logos.protocol.grammar import ACT_GRAMMAR, ANSWER_GRAMMAR, LOGOS_GRAMMAR
from logos.protocol.notices import (
    answer_form_notice,
    missing_look_notice,
    read_instead_notice,
    unworked_number_notice,
    unwritten_file_notice,
)
from tests.support.scripted import ScriptedProvider, config_for

pytestmark = pytest.mark.anyio
TASK = "How many lines are in notes.txt? Answer with just the number."
NUMBER_GRAMMAR = AnswerForm("number").grammar


def in_dir(
    directory: Path, provider: ScriptedProvider, policy: ReplyPolicy = SMALL_MODEL
) -> Config:
    options = ExecOptions(allowed_paths=(AllowedPath(path=str(directory), read_only=False),))
    return config_for(provider, replies=policy, exec_options=options)


def grammars_sent(provider: ScriptedProvider) -> list[object]:
    return [request.extra.get("grammar") for request in provider.requests]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("".join(f"note {i}\n" for i in range(7)))
    return tmp_path


async def test_an_answer_that_states_the_value_the_outputs_show_is_reduced_to_it(
    notes: Path,
) -> None:
    provider = ScriptedProvider.saying("<cmd>wc -l notes.txt</cmd>", "A draft.", "It has 7 lines.")
    result = await run(in_dir(notes, provider), [], TASK)
    assert (result.stop_reason, result.response) == ("final", "7")
    assert result.steps[-1].content == "It has 7 lines."  # the steps keep what the model wrote
    assert provider.requests[2].messages[-1].content.endswith(f"Question: {TASK}")


async def test_an_answer_without_the_value_is_asked_once_more_held_to_the_form(
    notes: Path,
) -> None:
    explained = "To count the lines, run:\n```\n$ wc -l notes.txt\n```"
    provider = ScriptedProvider.saying("<cmd>wc -l notes.txt</cmd>", "A draft.", explained, "7")
    result = await run(in_dir(notes, provider), [], TASK)
    assert (result.stop_reason, result.response) == ("final", "7")
    assert grammars_sent(provider) == [ACT_GRAMMAR, LOGOS_GRAMMAR, ANSWER_GRAMMAR, NUMBER_GRAMMAR]
    assert result.steps[-2].content == answer_form_notice(TASK)
    again = provider.requests[3].messages[-1].content
    assert again.endswith(f"Question: {TASK}\n{AnswerForm('number').instruction}")


async def test_a_frontier_model_s_answer_is_taken_as_written(notes: Path) -> None:
    provider = ScriptedProvider.saying("<cmd>wc -l notes.txt</cmd>", "It has 7 lines.")
    result = await run(in_dir(notes, provider, ReplyPolicy()), [], TASK)
    assert (result.stop_reason, result.response) == ("final", "It has 7 lines.")
    assert len(provider.requests) == 2


@pytest.fixture
def no_readme(tmp_path: Path) -> Path:
    (tmp_path / "package.json").write_text('{"dependencies": {"express": "^4.19.2"}}\n')
    (tmp_path / "server.js").write_text("const express = require('express');\n")
    return tmp_path


async def test_a_first_look_that_missed_its_readme_is_handed_the_manifest(
    no_readme: Path,
) -> None:
    provider = ScriptedProvider.saying(
        "<cmd>ls</cmd>\n<cmd>head -n 40 README.md</cmd>",
        "<cmd>head -n 40 package.json</cmd>",
        "A draft.",
        "JavaScript, with Express.",
    )
    result = await run(in_dir(no_readme, provider), [], "what framework does it use?")
    assert result.response == "JavaScript, with Express."
    assert result.steps[1].content.endswith(missing_look_notice("README.md", "package.json"))
    assert grammars_sent(provider)[:2] == [ACT_GRAMMAR, ACT_GRAMMAR]  # the next turn acts


async def test_an_answer_naming_an_unseen_framework_is_sent_to_read_the_manifest(
    no_readme: Path,
) -> None:
    provider = ScriptedProvider.saying(
        "<cmd>ls</cmd>",
        "A draft.",
        "JavaScript with React.",
        "<cmd>head -n 40 package.json</cmd>",
        "A second draft.",
        "JavaScript with Express.",
    )
    result = await run(in_dir(no_readme, provider), [], "what framework does it use?")
    assert result.response == "JavaScript with Express."
    assert result.steps[5].content == read_instead_notice("React", "package.json")
    assert grammars_sent(provider)[3] == ACT_GRAMMAR
    view = provider.requests[5].messages[-1].content
    assert '"express"' in view


async def test_an_answer_before_the_file_the_task_asks_for_is_written_is_sent_back_to_write_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "essay.txt").write_text("the river was cold\nwe forded it\n")
    offered = "wc -w < essay.txt > count.txt"
    provider = ScriptedProvider.saying(
        "<cmd>wc -w essay.txt</cmd>", "7 essay.txt", f"<cmd>{offered}</cmd>", "Done.", "Done."
    )
    task = "Create a file count.txt that contains the number of words in essay.txt."
    result = await run(in_dir(tmp_path, provider), [], task)
    assert result.steps[3].content == unwritten_file_notice("count.txt", offered)
    assert grammars_sent(provider)[:3] == [ACT_GRAMMAR, LOGOS_GRAMMAR, ACT_GRAMMAR]
    assert (tmp_path / "count.txt").read_text() == "7\n"
    assert result.response == "Done."


@pytest.fixture
def app_log(tmp_path: Path) -> Path:
    lines = ["INFO started", "ERROR disk full", "INFO served", "ERROR reset", "ERROR timeout"]
    (tmp_path / "app.log").write_text("".join(f"10:0{i} {line}\n" for i, line in enumerate(lines)))
    return tmp_path


async def test_a_count_read_off_a_listing_is_sent_back_to_be_counted_by_a_command(
    app_log: Path,
) -> None:
    counting = "grep ERROR app.log | wc -l"
    provider = ScriptedProvider.saying(
        "<cmd>grep ERROR app.log</cmd>", "2", f"<cmd>{counting}</cmd>", "A draft.", "3"
    )
    task = "How many lines of app.log contain ERROR?"
    result = await run(in_dir(app_log, provider), [], task)
    assert (result.stop_reason, result.response) == ("final", "3")
    assert result.steps[3].content == unworked_number_notice(counting)
    assert grammars_sent(provider) == [
        ACT_GRAMMAR,
        LOGOS_GRAMMAR,
        ACT_GRAMMAR,  # sent back to act
        LOGOS_GRAMMAR,
        ANSWER_GRAMMAR,
    ]
    assert result.steps[5].results[0].stdout == "3\n"


async def test_a_number_asked_again_that_no_output_shows_is_the_one_printed_alone(
    notes: Path,
) -> None:
    provider = ScriptedProvider.saying(
        "<cmd>wc -l notes.txt</cmd>", "A draft.", "Count them with wc.", "7127"
    )
    result = await run(in_dir(notes, provider), [], TASK)
    assert (result.stop_reason, result.response) == ("final", "7")
    assert grammars_sent(provider)[-1] == NUMBER_GRAMMAR
    assert result.steps[-1].content == "7127"  # the steps keep what the model wrote


async def test_a_change_the_model_only_printed_is_offered_made(tmp_path: Path) -> None:
    (tmp_path / "greeting.txt").write_text("hello world\n")
    printed = "sed 's/world/moon/' greeting.txt"
    made = f"{printed} > greeting.txt.new && mv greeting.txt.new greeting.txt"
    provider = ScriptedProvider.saying(
        f"<cmd>{printed}</cmd>", "hello moon", f"<cmd>{made}</cmd>", "Done.", "Done."
    )
    task = "In greeting.txt, replace the word world with the word moon."
    result = await run(in_dir(tmp_path, provider), [], task)
    assert result.steps[3].content == unwritten_file_notice("greeting.txt", made)
    assert grammars_sent(provider)[:3] == [ACT_GRAMMAR, LOGOS_GRAMMAR, ACT_GRAMMAR]
    assert (tmp_path / "greeting.txt").read_text() == "hello moon\n"
