"""The slips small local models make, each reproduced by a scripted model through the real
loop and real bash: an answer before any command ran, a made-up `<result>`, a command in a
Markdown fence, and the same failing command again and again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from logos import run
from logos.agent.replies import ReplyPolicy
from logos.agent.steps import RunResult, StepMessage, steps_to_messages
from logos.protocol.envelope import format_results
from logos.protocol.notices import CHECK_BACK_NOTICE, FABRICATED_RESULT_NOTICE
from logos.protocol.pitfalls import ADD_UP
from logos.providers import OpenAIProvider
from logos.providers.base import Message, Usage
from logos.result import Result
from tests.support.scripted import Reply, ScriptedProvider, config_for, numbers_file
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.anyio


def roles(steps: Sequence[StepMessage]) -> list[str]:
    return [step.role for step in steps]


# An answer before any command ran ---------------------------------------------------------


async def test_an_answer_before_any_command_ran_is_checked_back_once_and_a_command_runs(
    tmp_path: Path,
) -> None:
    numbers = numbers_file(tmp_path)
    provider = ScriptedProvider(
        [
            Reply("The sum is 60."),
            Reply(f"<cmd>{ADD_UP} {numbers}</cmd>"),
            Reply("The sum is 60."),
        ]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(check_back=True)),
        [],
        "sum the numbers in the file",
    )
    assert (result.stop_reason, result.response) == ("final", "The sum is 60.")
    assert roles(result.steps) == ["assistant", "result", "assistant", "result", "assistant"]
    notice = result.steps[1]
    assert notice.content == CHECK_BACK_NOTICE and not notice.results
    assert provider.requests[1].messages[-1] == Message(role="user", content=CHECK_BACK_NOTICE)
    assert result.steps[3].results[0].stdout == "60\n"
    # The check-back is a turn like any other: its usage counts.
    assert result.usage == Usage(input_tokens=300, output_tokens=60)


async def test_the_repeated_answer_stands() -> None:
    provider = ScriptedProvider([Reply("Paris."), Reply("Paris, as I said.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(check_back=True)), [], "capital of France?"
    )
    assert (result.stop_reason, result.response) == ("final", "Paris, as I said.")
    assert roles(result.steps) == ["assistant", "result", "assistant"]
    assert result.usage == Usage(input_tokens=200, output_tokens=40)


async def test_no_check_back_once_a_command_ran() -> None:
    provider = ScriptedProvider([Reply("<cmd>true</cmd>"), Reply("Done.")])
    result = await run(config_for(provider, replies=ReplyPolicy(check_back=True)), [], "go")
    assert (result.stop_reason, result.response) == ("final", "Done.")
    assert len(provider.requests) == 2


async def test_a_declined_block_counts_as_trying_a_command(tmp_path: Path) -> None:
    """The policy refused the block: the model did act, so its answer is not checked back."""
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    provider = ScriptedProvider([Reply(f"<cmd>sed -i 's/old/new/' {target}</cmd>"), Reply("ok")])
    result = await run(config_for(provider, replies=ReplyPolicy(check_back=True)), [], "go")
    assert result.response == "ok" and len(provider.requests) == 2


async def test_a_resumed_conversation_that_ran_commands_is_not_checked_back() -> None:
    history = [
        Message(role="user", content="count the files"),
        Message(role="assistant", content="<cmd>ls | wc -l</cmd>"),
        Message(role="user", content=format_results([Result(command="ls | wc -l", stdout="3\n")])),
        Message(role="assistant", content="There are 3."),
    ]
    provider = ScriptedProvider([Reply("Three.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(check_back=True)), history, "how many again?"
    )
    assert (result.stop_reason, result.response) == ("final", "Three.")


async def test_a_resumed_conversation_that_ran_no_command_is_checked_back() -> None:
    history = [
        Message(role="user", content="what is in hello.txt?"),
        Message(role="assistant", content="It says hello."),
    ]
    provider = ScriptedProvider([Reply("It says hello."), Reply("It says hello.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(check_back=True)), history, "are you sure?"
    )
    assert result.steps[1].content == CHECK_BACK_NOTICE
    assert result.response == "It says hello."


async def test_the_library_does_not_check_back_unless_asked() -> None:
    provider = ScriptedProvider([Reply("The sum is 60.")])
    result = await run(config_for(provider), [], "sum the numbers")
    assert (result.stop_reason, result.response) == ("final", "The sum is 60.")


async def test_no_check_back_on_the_last_turn_allowed() -> None:
    """With no turn left to answer it, a check-back would only lose the answer."""
    provider = ScriptedProvider([Reply("Paris.")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(check_back=True), max_steps=1), [], "capital?"
    )
    assert (result.stop_reason, result.response) == ("final", "Paris.")


# A made-up <result> on its own -------------------------------------------------------------


async def test_a_made_up_result_without_any_block_is_caught(tmp_path: Path) -> None:
    made = tmp_path / "hello.txt"
    provider = ScriptedProvider(
        [
            Reply("<result>hello.txt created</result>"),
            Reply(f"<cmd>echo hello > {made}</cmd>"),
            Reply("Done."),
        ]
    )
    result = await run(config_for(provider), [], "create hello.txt")
    assert (result.stop_reason, result.response) == ("final", "Done.")
    assert result.steps[0].content == ""  # the made-up result is discarded
    notice = result.steps[1]
    assert notice.content == FABRICATED_RESULT_NOTICE and not notice.results
    assert made.read_text() == "hello\n"


async def test_prose_before_a_made_up_result_is_kept() -> None:
    reply = 'I created the file.\n\n  <result>\n<block index="1">\n(no output)\n</block>'
    provider = ScriptedProvider([Reply(reply, chunk=3), Reply("It is not created yet.")])
    result = await run(config_for(provider), [], "create hello.txt")
    assert result.steps[0].content == "I created the file."
    assert result.steps[1].content == FABRICATED_RESULT_NOTICE
    assert result.response == "It is not created yet."


async def test_a_made_up_result_after_a_block_gets_the_same_notice() -> None:
    provider = ScriptedProvider([Reply("<cmd>echo real</cmd>\n<result>fake</result>"), Reply("ok")])
    result = await run(config_for(provider), [], "go")
    assert result.steps[1].results[0].stdout == "real\n"
    assert result.steps[1].content.endswith("\n\n" + FABRICATED_RESULT_NOTICE)


async def test_made_up_results_count_toward_the_fake_tool_call_limit() -> None:
    provider = ScriptedProvider([Reply("<result>\nok\n</result>")] * 3)
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "hallucination_limit"
    assert result.error is not None and "<result>" in result.error


@pytest.mark.parametrize(
    "answer",
    [
        "logos answers each reply with a <result> envelope, one block per command.",
        "`<result>` holds the outputs, one `<block>` per command.",
        'The harness replies like this:\n```\n<result>\n<block index="1">\n$ ls\n</block>\n'
        "</result>\n```",
    ],
)
async def test_an_answer_that_mentions_the_result_tag_stands(answer: str) -> None:
    provider = ScriptedProvider([Reply(answer)])
    result = await run(config_for(provider), [], "what does logos send back?")
    assert (result.stop_reason, result.response) == ("final", answer)


# Commands in a Markdown fence (the five tasks) -------------------------------------


@pytest.mark.parametrize(
    "slip",
    [
        "```bash\nwc -l notes.txt\n```",
        "I will create it:\n```sh\necho hello > hello.txt\n```",
        "```\ngrep -n 'def main' app.py\n```",
        "```console\n$ awk '{s+=$1} END {print s}' numbers.txt\n```",
        "To copy it:\n```\ncp a.txt b.txt\n```",
    ],
)
async def test_the_first_reply_in_a_fence_is_not_the_answer(slip: str) -> None:
    provider = ScriptedProvider([Reply(slip), Reply("<cmd>true</cmd>"), Reply("Done.")])
    result = await run(config_for(provider), [], "do the task")
    assert result.response == "Done."
    assert not result.steps[1].results and "<cmd>ls</cmd>" in result.steps[1].content


# The same failing command again and again --------------------------------------------------


def notes_of(result: RunResult) -> list[dict[int, str]]:
    return [dict(step.block_notes) for step in result.steps if step.role == "result"]


async def test_the_third_identical_failure_in_a_row_gets_a_note_under_its_block() -> None:
    provider = ScriptedProvider(
        [
            Reply("<cmd>exit 1</cmd>"),
            Reply("<cmd>  exit   1 </cmd>"),  # the same command once whitespace is collapsed
            Reply("<cmd>echo fine</cmd>\n<cmd>exit\t1</cmd>"),
            Reply("<cmd>exit 1</cmd>"),
            Reply("I give up."),
        ]
    )
    result = await run(config_for(provider), [], "go")
    envelopes = [step.content for step in result.steps if step.role == "result"]
    assert "note:" not in envelopes[0] and "note:" not in envelopes[1]
    third = envelopes[2]
    block = third[third.index('<block index="2">') : third.index("</block>", third.index("exit"))]
    assert "failed the same way 3 times in a row" in block and "something else" in block
    assert "note:" not in third[: third.index('<block index="2">')]
    assert "4 times in a row" in envelopes[3]
    assert notes_of(result)[2].keys() == {1}


async def test_the_same_command_failing_differently_gets_no_note(tmp_path: Path) -> None:
    counter = tmp_path / "n"
    command = f"n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}; exit $n"
    provider = ScriptedProvider([Reply(f"<cmd>{command}</cmd>")] * 3 + [Reply("ok")])
    result = await run(config_for(provider), [], "go")
    assert [r.exit_code for s in result.steps for r in s.results] == [1, 2, 3]
    assert "note:" not in "".join(step.content for step in result.steps)


async def test_a_turn_that_ran_other_commands_breaks_the_row() -> None:
    provider = ScriptedProvider(
        [Reply("<cmd>exit 1</cmd>")] * 2
        + [Reply("<cmd>true</cmd>")]
        + [Reply("<cmd>exit 1</cmd>")] * 2
        + [Reply("ok")]
    )
    result = await run(config_for(provider), [], "go")
    assert "note:" not in "".join(step.content for step in result.steps)


async def test_a_turn_that_ran_nothing_does_not_break_the_row() -> None:
    fake = '<tool_call>{"name": "bash"}</tool_call>'
    provider = ScriptedProvider(
        [Reply("<cmd>exit 1</cmd>")] * 2 + [Reply(fake), Reply("<cmd>exit 1</cmd>"), Reply("ok")]
    )
    result = await run(config_for(provider), [], "go")
    assert "3 times in a row" in result.steps[-2].content


async def test_the_note_survives_eliding_old_outputs() -> None:
    provider = ScriptedProvider([Reply("<cmd>echo o''ops; exit 1</cmd>")] * 3 + [Reply("ok")])
    result = await run(config_for(provider), [], "go")
    third = [m for m in steps_to_messages(result.steps) if m.role == "user"][2]
    assert "oops\n" in third.content
    assert third.elided is not None and "3 times in a row" in third.elided
    assert "oops" not in third.elided


async def test_the_note_can_be_turned_off() -> None:
    provider = ScriptedProvider([Reply("<cmd>exit 1</cmd>")] * 3 + [Reply("ok")])
    result = await run(
        config_for(provider, replies=ReplyPolicy(repeated_failure_note=None)), [], "go"
    )
    assert "note:" not in "".join(step.content for step in result.steps)


# The same slips over the real wire format -------------------------------------------------


async def test_a_real_server_streaming_the_slips_gets_each_notice(
    sse_server: ScriptedServer,
) -> None:
    sse_server.enqueue(
        openai_stream("<result>hello.txt created</result>", chunk_size=4),
        openai_stream("The file is there."),
        openai_stream("<cmd>exit 1</cmd>"),
        openai_stream("<cmd>exit 1</cmd>"),
        openai_stream("<cmd>exit 1</cmd>"),
        openai_stream("It cannot be created."),
    )
    async with OpenAIProvider(
        model="m", base_url=f"{sse_server.base_url}/v1", api_key="k"
    ) as provider:
        result = await run(
            config_for(provider, replies=ReplyPolicy(check_back=True)), [], "create hello.txt"
        )
    assert (result.stop_reason, result.response) == ("final", "It cannot be created.")
    sent = [request.json["messages"][-1]["content"] for request in sse_server.requests[1:]]
    assert sent[0] == FABRICATED_RESULT_NOTICE and sent[1] == CHECK_BACK_NOTICE
    assert "note:" not in sent[3] and "3 times in a row" in sent[4]
