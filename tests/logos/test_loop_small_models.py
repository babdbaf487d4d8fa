"""What the loop does for small local models, each behaviour with a scripted model through
the real loop and real bash: a grammar per kind of turn (act until a command succeeded,
free replies after, an answer after a repeated reply), the repetition notice, the worked
example sent before the conversation, and a refused `sed -i` answered with the same edit
through a new file, which the model then runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos import run
from logos.agent.config import Callbacks, Config
from logos.agent.replies import ReplyPolicy
from logos.options import AllowedPath, ExecOptions
from logos.protocol.grammar import ACT_GRAMMAR, ANSWER_GRAMMAR, LOGOS_GRAMMAR, ReplyGrammars
from logos.protocol.notices import (
    answer_notice,
    picked_file_note,
    project_commands_note,
    project_commands_notice,
    repeated_reply_notice,
    unpicked_file_notice,
)
from logos.protocol.plain_answer import ANSWER_SYSTEM
from logos.protocol.project_commands import ProjectCommand
from logos.protocol.worked_examples import DEFINITION, LAST_CHANGE, SMALL_MODEL_EXAMPLES
from logos.providers.base import Message
from tests.support.scripted import Reply, ScriptedProvider, config_for

pytestmark = pytest.mark.anyio


def grammars_sent(provider: ScriptedProvider) -> list[str | None]:
    return [request.extra.get("grammar") for request in provider.requests]


def in_dir(config: Config, directory: Path) -> Config:
    options = ExecOptions(allowed_paths=(AllowedPath(path=str(directory), read_only=False),))
    return Config(**{**config.__dict__, "exec_options": options})


async def test_the_first_reply_acts_and_the_replies_after_a_success_are_free() -> None:
    provider = ScriptedProvider([Reply("<cmd>true</cmd>"), Reply("It ran.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "go"
    )
    assert (result.stop_reason, result.response) == ("final", "It ran.")
    assert grammars_sent(provider) == [ACT_GRAMMAR, LOGOS_GRAMMAR]


async def test_a_reply_whose_commands_all_failed_is_followed_by_one_that_must_act() -> None:
    provider = ScriptedProvider(
        [
            Reply("<cmd>false</cmd>"),
            Reply("<cmd>true</cmd><cmd>false</cmd>"),  # one success is enough
            Reply("Done."),
        ]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "go"
    )
    assert result.stop_reason == "final"
    assert grammars_sent(provider) == [ACT_GRAMMAR, ACT_GRAMMAR, LOGOS_GRAMMAR]


async def test_a_conversation_that_already_ran_commands_does_not_start_by_acting() -> None:
    history = [Message("user", "go"), Message("assistant", "<cmd>ls</cmd>")]
    provider = ScriptedProvider([Reply("Still done.")])
    await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), history, "and now?"
    )
    assert grammars_sent(provider) == [LOGOS_GRAMMAR]


async def test_without_the_first_block_rule_every_reply_gets_the_free_grammar() -> None:
    provider = ScriptedProvider([Reply("Right away: 4.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars(act=None))), [], "2+2?"
    )
    assert result.response == "Right away: 4."
    assert grammars_sent(provider) == [LOGOS_GRAMMAR]


async def test_the_same_commands_to_the_same_output_force_an_answer_that_asks_the_task_again() -> (
    None
):
    provider = ScriptedProvider(
        [
            Reply("<cmd>echo 4</cmd>"),
            Reply("<cmd>echo 4</cmd>"),
            Reply("There are 4."),
        ]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "how many?"
    )
    assert (result.stop_reason, result.response) == ("final", "There are 4.")
    assert grammars_sent(provider) == [ACT_GRAMMAR, LOGOS_GRAMMAR, ANSWER_GRAMMAR]
    second_results = result.steps[3]
    assert second_results.content.endswith(repeated_reply_notice(True, "how many?"))
    assert repeated_reply_notice(True, "how many?") == "Answer from the output above: how many?"


async def test_without_grammars_a_repetition_is_only_pointed_out() -> None:
    provider = ScriptedProvider(
        [Reply("<cmd>echo 4</cmd>"), Reply("<cmd>echo 4</cmd>"), Reply("Four.")]
    )
    result = await run(config_for(provider), [], "how many?")
    assert result.response == "Four."
    assert result.steps[3].content.endswith(repeated_reply_notice(False, "how many?"))
    assert all("grammar" not in request.extra for request in provider.requests)


async def test_output_that_changed_is_not_a_repetition(tmp_path: Path) -> None:
    counter = tmp_path / "n"
    counter.write_text("1\n")
    bump = f"cat {counter} && echo 2 > {counter}"
    provider = ScriptedProvider(
        [Reply(f"<cmd>{bump}</cmd>"), Reply(f"<cmd>{bump}</cmd>"), Reply("ok")]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "go"
    )
    assert grammars_sent(provider) == [ACT_GRAMMAR, LOGOS_GRAMMAR, LOGOS_GRAMMAR]
    assert "Answer from the output above" not in result.steps[3].content


async def test_the_same_commands_failing_the_same_way_force_an_answer_whatever_they_printed() -> (
    None
):
    """What the default model did in a Rust crate: `pytest` again and again, each run
    printing another duration, until its time ran out."""
    flaky = "echo no tests ran in $RANDOM$RANDOM s; exit 5"
    provider = ScriptedProvider(
        [Reply(f"<cmd>{flaky}</cmd>"), Reply(f"<cmd>{flaky}</cmd>"), Reply("No tests ran.")]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "run the tests"
    )
    first, second = (step.results[0].stdout for step in result.steps[1:4:2])
    assert first != second
    assert grammars_sent(provider) == [ACT_GRAMMAR, ACT_GRAMMAR, ANSWER_GRAMMAR]
    assert result.steps[3].content.endswith(repeated_reply_notice(True, "run the tests"))


async def test_a_command_failing_another_way_is_not_a_repetition() -> None:
    provider = ScriptedProvider(
        [Reply(f"<cmd>{command}</cmd>") for command in ("exit 5", "exit 4", "true")] + [Reply("ok")]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "go"
    )
    assert result.response == "ok"
    assert grammars_sent(provider) == [ACT_GRAMMAR, ACT_GRAMMAR, ACT_GRAMMAR, LOGOS_GRAMMAR]


async def test_the_worked_example_is_sent_first_and_never_returned() -> None:
    example = (Message("user", "Which way?"), Message("assistant", "North."))
    provider = ScriptedProvider([Reply("<cmd>true</cmd>"), Reply("Done.")])
    result = await run(config_for(provider, replies=ReplyPolicy(examples=example)), [], "go")
    first, second = provider.requests
    assert tuple(first.messages[:2]) == example and first.messages[2] == Message("user", "go")
    assert tuple(second.messages[:2]) == example
    assert all(step.content not in {m.content for m in example} for step in result.steps)


async def test_the_worked_examples_sent_are_those_of_the_task() -> None:
    task = "where is parse_config defined?"
    provider = ScriptedProvider([Reply("<cmd>true</cmd>"), Reply("Done.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(examples=SMALL_MODEL_EXAMPLES)), [], task
    )
    sent = SMALL_MODEL_EXAMPLES.turns(task)
    assert sent[-4].content == DEFINITION.task  # the general ones, then the task's kind
    for request in provider.requests:
        assert tuple(request.messages[: len(sent)]) == sent
    assert result.steps[0].content == "<cmd>true</cmd>"


async def test_an_answer_about_the_last_commit_sees_the_example_of_its_kind_first() -> None:
    """From `git log`'s output alone the default model named a file or the hash."""
    task = "what changed in the last commit?"
    provider = ScriptedProvider(
        [Reply("<cmd>echo Fix the clock</cmd>"), Reply("Fixed."), Reply("It fixed the clock.")]
    )
    config = config_for(
        provider,
        replies=ReplyPolicy(
            grammars=ReplyGrammars(), examples=SMALL_MODEL_EXAMPLES, plain_answers=True
        ),
    )
    result = await run(config, [], task)
    assert result.response == "It fixed the clock."
    *example, view = provider.requests[2].messages
    assert tuple(example) == LAST_CHANGE.answering_turns()
    assert example[-1] == Message("assistant", LAST_CHANGE.answer)
    assert view.content.startswith("Commands ran in ") and "Fix the clock" in view.content
    assert view.content.endswith(f"Question: {task}")


async def test_a_refused_sed_in_place_is_followed_by_the_edit_it_offered(tmp_path: Path) -> None:
    target = tmp_path / "list.txt"
    target.write_text("alpha\nDELETE ME\ngamma\n")
    provider = ScriptedProvider(
        [
            Reply("<cmd>sed -i '/DELETE ME/d' list.txt</cmd>"),
            # What a small model does with the refusal: copy the block it offers.
            Reply(
                "<cmd>sed '/DELETE ME/d' list.txt > list.txt.new && mv list.txt.new list.txt</cmd>"
            ),
            Reply("The line is gone."),
        ]
    )
    config = in_dir(config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), tmp_path)
    result = await run(config, [], "remove the DELETE ME line from list.txt")
    assert result.stop_reason == "final"
    refusal = result.steps[1].results[0].error
    assert refusal is not None and "<cmd>sed '/DELETE ME/d' list.txt > list.txt.new" in refusal
    # The refusal ran nothing, so the next reply had to act again.
    assert grammars_sent(provider) == [ACT_GRAMMAR, ACT_GRAMMAR, LOGOS_GRAMMAR]
    assert target.read_text() == "alpha\ngamma\n"


async def test_two_grammars_are_refused() -> None:
    with pytest.raises(ValueError, match="two grammars"):
        config_for(
            ScriptedProvider([]),
            replies=ReplyPolicy(grammars=ReplyGrammars()),
            provider_options={"grammar": "root ::= [a-z]+"},
        )


async def test_a_forced_answer_is_asked_from_the_outputs_alone_and_comes_back_clean() -> None:
    """What the README's first question does with the default model: a first look, the
    same look again, then the answer, which sees the task and the outputs, not the
    conversation with its worked example (whose made-up project a small model copies)."""
    look = "<cmd>echo '# tool: adds numbers'</cmd>\n<cmd>printf 'a.py\\nREADME.md\\n'</cmd>"
    provider = ScriptedProvider(
        [Reply(look), Reply(look), Reply("- It adds numbers.<3cmd>info<3cmd>" + "<->" * 40)]
    )
    config = config_for(
        provider,
        replies=ReplyPolicy(
            grammars=ReplyGrammars(), examples=SMALL_MODEL_EXAMPLES, plain_answers=True
        ),
    )
    result = await run(config, [], "what does this do?")
    assert (result.stop_reason, result.response) == ("final", "- It adds numbers. info")
    assert grammars_sent(provider) == [ACT_GRAMMAR, LOGOS_GRAMMAR, ANSWER_GRAMMAR]
    answering = provider.requests[2]
    assert answering.system == ANSWER_SYSTEM
    (view,) = answering.messages
    assert view.content.count("\n# tool: adds numbers\n") == 1  # the repeat is shown once
    assert view.content.endswith("Question: what does this do?")
    assert "tides" not in view.content  # nothing of the worked example
    # The steps keep what the model wrote.
    assert "<3cmd>" in result.steps[-1].content


async def test_without_plain_answers_the_answer_is_taken_as_written() -> None:
    provider = ScriptedProvider([Reply("<cmd>true</cmd>"), Reply("It is <-> done.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())), [], "go"
    )
    assert result.response == "It is <-> done."


async def test_an_answer_after_commands_is_asked_again_from_the_outputs_alone() -> None:
    """What the default model did on "what does this repository do?" in a web app: it
    answered the worked example's question; asked from the outputs, it reads them."""
    provider = ScriptedProvider(
        [
            Reply("<cmd>echo 'a pastebin'</cmd>"),
            Reply("Python: the directory holds setup.py, and README.md says so."),
            Reply("It is a pastebin."),
        ]
    )
    config = config_for(
        provider,
        replies=ReplyPolicy(
            grammars=ReplyGrammars(), examples=SMALL_MODEL_EXAMPLES, plain_answers=True
        ),
    )
    result = await run(config, [], "what does this do?")
    assert result.response == "It is a pastebin."
    assert grammars_sent(provider) == [ACT_GRAMMAR, LOGOS_GRAMMAR, ANSWER_GRAMMAR]
    assert provider.requests[2].system == ANSWER_SYSTEM
    assert [step.content for step in result.steps[2:4]] == [
        "Python: the directory holds setup.py, and README.md says so.",
        answer_notice("what does this do?"),
    ]


async def test_with_plain_answers_only_the_answer_asked_from_the_outputs_streams() -> None:
    provider = ScriptedProvider(
        [Reply("Looking.<cmd>true</cmd>"), Reply("A draft."), Reply("It ran true.")]
    )
    config = config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars(), plain_answers=True))
    streamed: list[str] = []
    result = await run(config, [], "go", Callbacks(on_delta=streamed.append))
    assert result.response == "It ran true."
    assert "".join(streamed) == "Looking.It ran true."  # not the draft


async def test_an_answer_that_is_only_debris_counts_as_an_empty_reply() -> None:
    provider = ScriptedProvider(
        [Reply("<cmd>true</cmd>"), Reply("It ran."), Reply("<-><-><-><->"), Reply("It ran true.")]
    )
    config = config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars(), plain_answers=True))
    result = await run(config, [], "go")
    assert result.response == "It ran true."
    assert grammars_sent(provider)[2:] == [ANSWER_GRAMMAR, ANSWER_GRAMMAR]


async def test_a_how_to_answer_without_the_projects_command_is_asked_again_told_it(
    tmp_path: Path,
) -> None:
    """What the default model did on a C project: it read the Makefile and answered "execute
    the `test` command"; told the command the Makefile gives, it answers with it."""
    (tmp_path / "Makefile").write_text("test: ringbuf_test\n\t./ringbuf_test\n")
    provider = ScriptedProvider(
        [
            Reply("<cmd>head -n 40 Makefile</cmd>"),
            Reply("A draft."),
            Reply("You need to execute the `test` command."),
            Reply("Run `make test`."),
        ]
    )
    config = config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars(), plain_answers=True))
    task = "how do I run the tests of this project?"
    result = await run(in_dir(config, tmp_path), [], task)
    assert result.response == "Run `make test`."
    given = [ProjectCommand("make test", "the Makefile's test target")]
    assert result.steps[-2].content == project_commands_notice(given)
    note = project_commands_note(given)
    last = provider.requests[-1]
    assert last.system == ANSWER_SYSTEM
    assert last.messages[-1].content.endswith(f"Question: {task}\n{note}")
    told = [step.content for step in result.steps if step.role == "result"]
    assert told and not any("make test" in content for content in told), (
        "the command is told only in the answer's view: an acting turn could run it"
    )


async def test_a_file_named_off_a_listing_is_searched_for_before_the_answer(
    tmp_path: Path,
) -> None:
    """What the default model did, every try, asked which file in a directory holds a word:
    it listed the directory and named a file off the listing; handed the search, it runs it
    and answers with the file the search printed."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "ideas.md").write_text("a bigger garden\n")
    (tmp_path / "notes" / "plan.md").write_text("step 1\nTODO: book the room\n")
    provider = ScriptedProvider(
        [
            Reply("<cmd>ls notes</cmd>"),
            Reply("ideas.md"),
            Reply("<cmd>grep -rl TODO notes</cmd>"),
            Reply("A draft."),
            Reply("notes/plan.md"),
        ]
    )
    config = config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars(), plain_answers=True))
    task = "Which file in the notes directory contains the word TODO?"
    result = await run(in_dir(config, tmp_path), [], task)
    assert result.response == "notes/plan.md"
    told = [step.content for step in result.steps if step.role == "result"]
    assert told[1] == unpicked_file_notice("holds TODO", "grep -rl TODO notes")
    assert "notes/plan.md" in told[2]  # the search ran, in bash, and found the file
    assert grammars_sent(provider)[2] == ACT_GRAMMAR  # the turn after the notice must act
    last = provider.requests[-1]
    assert last.system == ANSWER_SYSTEM
    assert last.messages[-1].content.endswith(
        f"Question: {task}\n{picked_file_note('holds TODO', ['notes/plan.md'])}"
    )
