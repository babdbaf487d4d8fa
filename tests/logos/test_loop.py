"""The agent loop, driven deterministically by a scripted model, with real bash."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from logos import (
    Callbacks,
    Config,
    ExecOptions,
    Result,
    Runner,
    format_results,
    run,
    run_sync,
)
from logos.agent.steps import RunResult, StepMessage, steps_to_messages
from logos.errors import AuthenticationError
from logos.providers import OpenAIProvider, RetryPolicy
from logos.providers.base import Message, Usage
from tests.support.processes import processes_matching
from tests.support.scripted import Reply, ScriptedProvider, config_for
from tests.support.sse_server import ScriptedServer, json_error, openai_stream

pytestmark = pytest.mark.anyio


async def test_answer_without_blocks_is_final() -> None:
    provider = ScriptedProvider([Reply("All done.\n\n\nNothing to run.")])
    result = await run(config_for(provider), [], "hi")
    assert result.stop_reason == "final" and result.ok
    assert result.response == "All done.\n\nNothing to run."
    assert [s.role for s in result.steps] == ["assistant"]
    assert result.usage == Usage(input_tokens=100, output_tokens=20)
    request = provider.requests[0]
    assert request.system == "test system prompt"
    assert request.messages == [Message(role="user", content="hi")]


async def test_blocks_run_and_results_return_in_one_envelope() -> None:
    provider = ScriptedProvider(
        [
            Reply("Let me look.\n<cmd>echo one</cmd>\n<cmd>echo two >&2; exit 3</cmd>"),
            Reply("The first printed one."),
        ]
    )
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final" and result.response == "The first printed one."
    assistant, results, final = result.steps
    assert assistant.role == "assistant" and "<cmd>echo one</cmd>" in assistant.content
    assert results.role == "result"
    assert [r.stdout for r in results.results] == ["one\n", ""]
    assert results.results[1].exit_code == 3
    envelope = provider.requests[1].messages[-1].content
    assert envelope == results.content
    assert (
        envelope.index("$ echo one") < envelope.index("$ echo two") < envelope.index("exit code 3")
    )
    assert final.role == "assistant"
    assert result.usage.input_tokens == 200


async def test_the_system_prompt_defaults_to_this_machines_and_can_be_left_out(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([Reply("ok"), Reply("ok")])
    await run(Config(provider, exec_options=ExecOptions(workdir=str(tmp_path))), [], "go")
    await run(config_for(provider, system_prompt=""), [], "go")
    default, empty = (request.system for request in provider.requests)
    assert str(tmp_path) in default
    assert empty == ""


async def test_history_is_sent_before_the_prompt() -> None:
    provider = ScriptedProvider([Reply("ok")])
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}]
    await run(config_for(provider), history, "now")
    assert [m.content for m in provider.requests[0].messages] == ["earlier", "reply", "now"]


async def test_dict_history_keeps_reasoning_and_redacted_blocks() -> None:
    provider = ScriptedProvider([Reply("ok")])
    history = [
        {"role": "user", "content": "earlier"},
        {
            "role": "assistant",
            "content": "reply",
            "reasoning": "think",
            "reasoning_signature": "sig==",
            "redacted_reasoning": ["opaque=="],
        },
    ]
    await run(config_for(provider), history, "now")
    sent = provider.requests[0].messages[1]
    assert (sent.reasoning, sent.reasoning_signature) == ("think", "sig==")
    assert sent.redacted_reasoning == ("opaque==",)
    with pytest.raises(ValueError, match=r"history\[1\]\['redacted_reasoning'\] must be a list"):
        await run(
            config_for(provider), [history[0], {**history[1], "redacted_reasoning": "x"}], "now"
        )


@pytest.mark.timeout(30)
async def test_blocks_start_while_the_model_is_still_streaming() -> None:
    text = "<cmd>sleep 1; echo done</cmd>" + " and more prose" * 10
    provider = ScriptedProvider([Reply(text, chunk=5, delay_s=0.03), Reply("ok")])
    started_at: list[float] = []
    callbacks = Callbacks(on_command_start=lambda i, c: started_at.append(anyio.current_time()))
    began = time.monotonic()
    result = await run(config_for(provider), [], "go", callbacks)
    assert result.stop_reason == "final"
    assert started_at and started_at[0] < provider.stream_finished_at[0] - 0.5
    # Streaming (~1.1 s) and the 1 s command overlap instead of adding up.
    assert time.monotonic() - began < 3.0


@pytest.mark.timeout(30)
async def test_blocks_of_one_reply_run_concurrently() -> None:
    blocks = "".join(f"<cmd>sleep 1; echo {i}</cmd>\n" for i in range(4))
    provider = ScriptedProvider([Reply(blocks), Reply("ok")])
    began = time.monotonic()
    result = await run(config_for(provider), [], "go")
    assert time.monotonic() - began < 3.5
    assert [r.stdout for r in result.steps[1].results] == ["0\n", "1\n", "2\n", "3\n"]


async def test_prose_streams_through_on_delta_without_blocks() -> None:
    provider = ScriptedProvider(
        [Reply("Before <cmd>echo secret-command</cmd> after.", chunk=3), Reply("Fin.")]
    )
    deltas: list[str] = []
    await run(config_for(provider), [], "go", Callbacks(on_delta=deltas.append))
    shown = "".join(deltas)
    assert "secret-command" not in shown and "<cmd>" not in shown
    assert shown.startswith("Before ") and "after." in shown and shown.endswith("Fin.")


async def test_fake_tool_calls_get_escalating_corrections_then_stop() -> None:
    fake = '<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>'
    provider = ScriptedProvider([Reply(fake), Reply(fake), Reply(fake)])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "hallucination_limit"
    assert result.error is not None and "tool_call" in result.error
    assert [s.role for s in result.steps] == [
        "assistant",
        "result",
        "assistant",
        "result",
        "assistant",
    ]
    first, second = result.steps[1].content, result.steps[3].content
    assert "<cmd>" in first and first != second and "stops" in second
    assert result.usage.output_tokens == 60


async def test_a_real_block_resets_the_hallucination_count() -> None:
    fake = '<invoke name="bash">ls</invoke>'
    provider = ScriptedProvider(
        [
            Reply(fake),
            Reply(fake),
            Reply("<cmd>true</cmd>"),
            Reply(fake),
            Reply(fake),
            Reply("done"),
        ]
    )
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final"


async def test_tool_call_syntax_inside_a_block_is_not_a_hallucination() -> None:
    provider = ScriptedProvider([Reply("<cmd>echo '<tool_call>'</cmd>"), Reply("done")])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final"
    assert result.steps[1].results[0].stdout == "<tool_call>\n"


async def test_blocked_command_is_not_run_and_the_model_is_told(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    provider = ScriptedProvider([Reply(f"<cmd>sed -i 's/old/new/' {target}</cmd>"), Reply("ok")])
    result = await run(config_for(provider), [], "go")
    assert target.read_text() == "old\n"
    (refused,) = result.steps[1].results
    assert refused.error is not None and refused.exit_code is None
    assert refused.error in provider.requests[1].messages[-1].content


async def test_cut_inside_an_unclosed_block_is_not_a_final_answer(tmp_path: Path) -> None:
    target = tmp_path / "never.txt"
    provider = ScriptedProvider(
        [
            Reply(f"<cmd>echo first</cmd> then <cmd>cat > {target} <<'EOF'\nlong", finish="length"),
            Reply("understood"),
        ]
    )
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final" and result.response == "understood"
    assert not target.exists()
    notice = provider.requests[1].messages[-1].content
    assert "first" in notice and "cut off" in notice and "NOT run" in notice


async def test_empty_reply_is_not_a_final_answer() -> None:
    provider = ScriptedProvider([Reply(""), Reply("  \n"), Reply("real answer")])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final" and result.response == "real answer"
    assert "empty" in provider.requests[1].messages[-1].content
    # An empty assistant turn is not sent back: providers reject empty messages.
    assert all(m.content.strip() for m in provider.requests[2].messages)


async def test_empty_replies_cut_at_the_token_limit_say_to_raise_max_tokens() -> None:
    cut = Reply("", finish="length", reasoning="Let me think about this at length")
    provider = ScriptedProvider([cut, cut, cut])
    result = await run(config_for(provider, max_tokens=64), [], "go")
    assert result.stop_reason == "error"
    assert result.error is not None and "raise max_tokens" in result.error
    assert "output token limit" in provider.requests[1].messages[-1].content


async def test_empty_replies_end_the_run_with_what_to_check() -> None:
    provider = ScriptedProvider([Reply("")] * 3)
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "3 empty replies in a row" in result.error and "chat template" in result.error


async def test_runner_errors_and_timeouts_go_back_to_the_model(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("<cmd>sleep 5</cmd>"), Reply("it timed out")])
    options = ExecOptions(timeout_s=0.3, workdir=str(tmp_path))
    result = await run(config_for(provider, exec_options=options), [], "go")
    assert result.stop_reason == "final"
    assert result.steps[1].results[0].timed_out
    assert "timed out" in provider.requests[1].messages[-1].content

    class Unreachable(Runner):
        async def run(self, command: str, options: ExecOptions) -> Result:
            return Result(command=command, error="sandbox unreachable: start it")

        async def aclose(self) -> None:
            pass

    provider = ScriptedProvider([Reply("<cmd>ls</cmd>"), Reply("ok")])
    result = await run(config_for(provider, runner=Unreachable()), [], "go")
    assert result.stop_reason == "final"
    assert "sandbox unreachable" in provider.requests[1].messages[-1].content


async def test_provider_error_ends_the_run_and_keeps_steps_and_usage() -> None:
    provider = ScriptedProvider(
        [
            Reply("<cmd>echo hi</cmd>", usage=Usage(input_tokens=10, output_tokens=5)),
            Reply(error=AuthenticationError("the API key was rejected: check X_API_KEY", 401)),
        ]
    )
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "error"
    assert result.error == "the API key was rejected: check X_API_KEY"
    assert [s.role for s in result.steps] == ["assistant", "result"]
    assert result.usage == Usage(input_tokens=10, output_tokens=5)


@pytest.mark.parametrize("where", ["on_delta", "on_command_result"])
async def test_a_failing_callback_ends_the_run_with_its_own_error(where: str) -> None:
    def broken(*args: object) -> None:
        raise ValueError(f"{where} broke")

    provider = ScriptedProvider([Reply("Looking. <cmd>echo hi</cmd>"), Reply("ok")])
    result = await run(config_for(provider), [], "go", Callbacks(**{where: broken}))
    assert result.stop_reason == "error"
    assert result.error == f"ValueError: {where} broke"


async def test_real_provider_retries_reach_on_retry_and_a_spent_run_keeps_its_usage(
    sse_server: ScriptedServer,
) -> None:
    sse_server.enqueue(
        json_error(429, "slow down", headers={"retry-after": "0.1"}),
        openai_stream("<cmd>echo hi</cmd>", usage={"prompt_tokens": 50, "completion_tokens": 5}),
        *[json_error(503, "down for maintenance")] * 2,
    )
    retries: list[tuple[str, int]] = []
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.0)
    async with OpenAIProvider(
        model="m", base_url=f"{sse_server.base_url}/v1", api_key="k", retry=policy
    ) as provider:
        callbacks = Callbacks(on_retry=lambda reason, attempt: retries.append((reason, attempt)))
        result = await run(config_for(provider), [], "go", callbacks)
    assert [attempt for _, attempt in retries] == [1, 1]
    assert "rate limited" in retries[0][0] and "unavailable" in retries[1][0]
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "gave up after 2 attempts" in result.error and "down for maintenance" in result.error
    assert [s.role for s in result.steps] == ["assistant", "result"]
    assert result.usage == Usage(input_tokens=50, output_tokens=5)


async def test_a_context_window_error_elides_old_outputs_and_asks_again(
    sse_server: ScriptedServer,
) -> None:
    # The model's window is unknown (a local server named "m"): only the server can say.
    sse_server.enqueue(
        openai_stream("<cmd>python3 -c \"print('x' * 20000)\"</cmd>"),
        json_error(
            400,
            "This model's maximum context length is 4096 tokens. However, your messages "
            "resulted in 7000 tokens.",
            code="context_length_exceeded",
        ),
        openai_stream("done"),
    )
    retries: list[str] = []
    options = ExecOptions(max_output_bytes=32_000)
    async with OpenAIProvider(
        model="m", base_url=f"{sse_server.base_url}/v1", api_key="k"
    ) as provider:
        result = await run(
            config_for(provider, exec_options=options),
            [],
            "go",
            Callbacks(on_retry=lambda reason, attempt: retries.append(reason)),
        )
    assert (result.stop_reason, result.response) == ("final", "done"), result.error
    assert len(retries) == 1 and "context window" in retries[0]
    rejected, accepted = sse_server.requests[1].json, sse_server.requests[2].json
    assert "x" * 20000 in rejected["messages"][-1]["content"]
    assert "elided" in accepted["messages"][-1]["content"]
    assert "x" * 20000 not in accepted["messages"][-1]["content"]
    assert result.steps[1].results[0].stdout == "x" * 20000 + "\n"  # the steps keep it all


async def test_a_context_window_error_with_nothing_to_elide_ends_the_run(
    sse_server: ScriptedServer,
) -> None:
    sse_server.enqueue(json_error(400, "the request exceeds the available context size"))
    async with OpenAIProvider(
        model="m", base_url=f"{sse_server.base_url}/v1", api_key="k"
    ) as provider:
        result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "error" and result.error is not None
    assert "does not fit the model's context window" in result.error
    assert len(sse_server.requests) == 1


async def test_stream_interrupted_mid_reply_continues_with_a_notice() -> None:
    provider = ScriptedProvider(
        [Reply("<cmd>echo ran</cmd> and then", interrupt_after=25), Reply("recovered")]
    )
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final" and result.response == "recovered"
    assert result.steps[1].results[0].stdout == "ran\n"
    assert "interrupted" in provider.requests[1].messages[-1].content


async def test_three_interruptions_in_a_row_end_the_run() -> None:
    cut = Reply("<cmd>true</cmd> and then", interrupt_after=20)
    provider = ScriptedProvider([cut, cut, cut, Reply("never asked")])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "error" and len(provider.requests) == 3
    assert result.error is not None
    assert "3 times in a row" in result.error and "connection reset" in result.error
    assert [s.role for s in result.steps] == ["assistant", "result"] * 3


async def test_interruptions_apart_do_not_end_the_run() -> None:
    replies = []
    for index in range(3):
        replies += [
            Reply(f"<cmd>echo {index}</cmd> then", interrupt_after=20),
            Reply("<cmd>true</cmd>"),
        ]
    provider = ScriptedProvider([*replies, Reply("done")])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final" and result.response == "done"


async def test_fabricated_results_are_cut_and_the_model_is_told() -> None:
    provider = ScriptedProvider(
        [
            Reply("<cmd>echo real</cmd>\n<result>\nfake output\n</result>\nSo it is fake."),
            Reply("ok"),
        ]
    )
    result = await run(config_for(provider), [], "go")
    assistant = result.steps[0].content
    assert "fake output" not in assistant and assistant.endswith("</cmd>")
    assert result.steps[1].results[0].stdout == "real\n"
    assert "discarded" in result.steps[1].content


async def test_max_steps_stops_cleanly() -> None:
    provider = ScriptedProvider([Reply("<cmd>true</cmd>")] * 3)
    result = await run(config_for(provider, max_steps=3), [], "go")
    assert result.stop_reason == "max_steps" and result.response == ""
    assert len(result.steps) == 6 and len(provider.requests) == 3


async def test_cost_budget_uses_reported_cost() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100, cost_usd=0.4)
    provider = ScriptedProvider([Reply("<cmd>true</cmd>", usage=usage)] * 5)
    result = await run(config_for(provider, max_cost_usd=1.0), [], "go")
    assert result.stop_reason == "max_cost"
    assert result.cost_usd == pytest.approx(1.2)
    assert len(provider.requests) == 3


async def test_cost_from_the_price_table_and_unknown_models() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    known = ScriptedProvider([Reply("done", usage=usage)], model="gpt-4o-mini")
    result = await run(config_for(known), [], "go")
    assert result.cost_usd is not None and result.cost_usd > 0
    unknown = ScriptedProvider([Reply("done", usage=usage)], model="my-local-gguf")
    result = await run(config_for(unknown, max_cost_usd=0.01), [], "go")
    assert result.stop_reason == "final" and result.cost_usd is None


async def test_token_budget() -> None:
    usage = Usage(input_tokens=600, output_tokens=100)
    provider = ScriptedProvider([Reply("<cmd>true</cmd>", usage=usage)] * 5)
    result = await run(config_for(provider, max_total_tokens=1000), [], "go")
    assert result.stop_reason == "max_tokens_budget" and len(provider.requests) == 2


SPENT = Usage(input_tokens=100, output_tokens=20, cost_usd=0.25)
"""What a reply that finished cost, to check that a run cut short still counts it."""


@pytest.mark.timeout(30)
async def test_wall_clock_budget_kills_commands_and_keeps_steps() -> None:
    marker = f"sleep 5{os.getpid() % 1000:03d}1"
    provider = ScriptedProvider([Reply(f"<cmd>echo early</cmd><cmd>{marker}</cmd>", usage=SPENT)])
    began = time.monotonic()
    result = await run(config_for(provider, max_wall_s=0.5), [], "go")
    assert result.stop_reason == "max_wall_time"
    assert time.monotonic() - began < 4
    assert [step.role for step in result.steps] == ["assistant", "result"]
    finished, killed = result.steps[1].results
    assert finished.stdout == "early\n" and finished.exit_code == 0
    assert (
        killed.error
        == "not finished: the run reached its wall-clock limit, so the command was killed"
    )
    assert killed.command == marker and "not finished" in result.steps[1].content
    assert not processes_matching(marker)
    # The model finished its reply before the clock ran out: what it spent is kept.
    assert result.usage == SPENT and result.cost_usd == pytest.approx(0.25)


async def cancel_once_running(marker: str, cancel: anyio.Event) -> None:
    """Sets `cancel` as soon as a process whose command line holds `marker` runs."""
    with anyio.fail_after(20):
        while not processes_matching(marker):
            await anyio.sleep(0.02)
    cancel.set()


async def run_canceled_once_running(provider: ScriptedProvider, marker: str) -> RunResult:
    """A run on `provider`, canceled as soon as its command `marker` runs."""
    cancel = anyio.Event()
    async with anyio.create_task_group() as watcher:
        watcher.start_soon(cancel_once_running, marker, cancel)
        return await run(config_for(provider), [], "go", cancel=cancel)


@pytest.mark.timeout(30)
async def test_cancel_event_stops_the_stream_and_kills_commands() -> None:
    marker = f"sleep 6{os.getpid() % 1000:03d}1"
    provider = ScriptedProvider([Reply(f"<cmd>{marker}</cmd>" + " slow" * 400, delay_s=0.05)])
    result = await run_canceled_once_running(provider, marker)
    assert result.stop_reason == "canceled"
    assert result.steps and "<cmd>" in result.steps[0].content
    assert provider.stream_finished_at == []  # the stream was stopped part-way
    await anyio.sleep(0.1)
    assert not processes_matching(marker)


@pytest.mark.timeout(30)
async def test_cancel_keeps_the_usage_of_a_finished_reply() -> None:
    marker = f"sleep 8{os.getpid() % 1000:03d}1"
    provider = ScriptedProvider([Reply(f"<cmd>{marker}</cmd>", usage=SPENT)])
    result = await run_canceled_once_running(provider, marker)
    assert result.stop_reason == "canceled"
    assert result.usage == SPENT and result.cost_usd == pytest.approx(0.25)
    assert [step.role for step in result.steps] == ["assistant", "result"]
    assert result.steps[1].results[0].error == (
        "not finished: the run was canceled, so the command was killed"
    )
    assert not processes_matching(marker)


@pytest.mark.timeout(30)
async def test_outer_cancel_scope_kills_commands() -> None:
    marker = f"sleep 7{os.getpid() % 1000:03d}1"
    provider = ScriptedProvider([Reply(f"<cmd>{marker}</cmd>")])
    saved: list[StepMessage] = []
    running = anyio.Event()
    returned = False
    async with anyio.create_task_group() as group:

        async def cancel_the_caller() -> None:
            await running.wait()
            group.cancel_scope.cancel()

        group.start_soon(cancel_once_running, marker, running)
        group.start_soon(cancel_the_caller)
        await run(config_for(provider), [], "go", Callbacks(on_step_end=saved.append))
        returned = True
    assert not returned  # the cancellation propagated, as anyio requires
    await anyio.sleep(0.1)
    assert not processes_matching(marker)
    assert [step.role for step in saved] == ["assistant", "result"]
    assert saved[1].results[0].error is not None and "canceled" in saved[1].results[0].error


async def test_old_outputs_are_elided_near_the_context_window() -> None:
    big = "<cmd>python3 -c \"print('x' * 6000)\"</cmd>"
    provider = ScriptedProvider(
        [Reply(big), Reply(big), Reply(big), Reply("done")], context_window=6000
    )
    options = ExecOptions(max_output_bytes=16000)
    result = await run(config_for(provider, exec_options=options), [], "go")
    assert result.stop_reason == "final"
    last_request = provider.requests[-1].messages
    first_envelope = last_request[2].content
    assert "elided" in first_envelope and "$ python3" in first_envelope
    assert "x" * 6000 in last_request[-1].content  # the newest output is intact
    assert all("x" * 6000 in s.results[0].stdout for s in result.steps if s.role == "result")


async def test_reasoning_is_kept_and_round_tripped() -> None:
    provider = ScriptedProvider(
        [Reply("<cmd>true</cmd>", reasoning="think", signature="sig=="), Reply("done")]
    )
    reasoning: list[str] = []
    result = await run(
        config_for(provider), [], "go", Callbacks(on_reasoning_delta=reasoning.append)
    )
    assert reasoning == ["think"]
    step = result.steps[0]
    assert (step.reasoning, step.reasoning_signature) == ("think", "sig==")
    sent = provider.requests[1].messages[1]
    assert (sent.role, sent.reasoning, sent.reasoning_signature) == ("assistant", "think", "sig==")
    messages = steps_to_messages(result.steps)
    assert [m.role for m in messages] == ["assistant", "user", "assistant"]
    assert messages[0].reasoning_signature == "sig=="


async def test_resume_from_steps() -> None:
    first = await run(
        config_for(ScriptedProvider([Reply("<cmd>echo 1</cmd>"), Reply("a")])), [], "p1"
    )
    provider = ScriptedProvider([Reply("b")])
    history = [Message(role="user", content="p1"), *steps_to_messages(first.steps)]
    second = await run(config_for(provider), history, "p2")
    assert second.response == "b"
    assert [m.role for m in provider.requests[0].messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_run_sync() -> None:
    provider = ScriptedProvider([Reply("<cmd>echo sync</cmd>"), Reply("done")])
    result = run_sync(config_for(provider), [], "go")
    assert result.response == "done" and result.steps[1].results[0].stdout == "sync\n"


def test_bad_history_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="role 'system'"):
        run_sync(config_for(ScriptedProvider([])), [{"role": "system", "content": "x"}], "go")


async def test_envelopes_in_a_resumed_history_are_elided_too() -> None:
    results = (Result(command="cat big.log", stdout="y\n" * 4000, exit_code=0),)
    old_steps = [
        StepMessage(role="assistant", content="<cmd>cat big.log</cmd>"),
        StepMessage(role="result", content=format_results(results), results=results),
        StepMessage(role="assistant", content="It is all y."),
    ]
    history = [Message(role="user", content="first task"), *steps_to_messages(old_steps)]
    provider = ScriptedProvider([Reply("done")], context_window=2000)
    await run(config_for(provider), history, "follow-up")
    sent = provider.requests[0].messages[2].content
    assert "elided" in sent and "$ cat big.log" in sent and "y\ny\n" not in sent


async def test_a_command_in_a_bash_fence_is_not_run_and_the_model_is_shown_cmd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WHY a relative path: the notice quotes a long command shortened, and tmp_path's length
    # depends on how the tests are run.
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    provider = ScriptedProvider(
        [
            Reply("I will create it:\n```bash\ntouch ran\n```"),
            Reply("<cmd>touch ran</cmd>"),
            Reply("Created."),
        ]
    )
    result = await run(config_for(provider), [], "create the file")
    assert (result.stop_reason, result.response) == ("final", "Created.")
    notice = result.steps[1]
    assert notice.role == "result" and not notice.results
    assert "<cmd>ls</cmd>" in notice.content and "('touch ran')" in notice.content
    assert provider.requests[1].messages[-1].content == notice.content
    assert marker.exists()  # created by the <cmd> block of the second reply only
    assert len(result.steps[3].results) == 1


async def test_commands_in_fences_count_toward_the_fake_tool_call_limit() -> None:
    fenced = "```sh\nls -la\n```"
    fake = '<tool_call>{"name": "bash"}</tool_call>'
    provider = ScriptedProvider([Reply(fenced), Reply(fake), Reply("```console\n$ pwd\n```")])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "hallucination_limit"
    assert result.error is not None and "fence" in result.error and "'pwd'" in result.error
    first, second = result.steps[1].content, result.steps[3].content
    assert "<cmd>ls</cmd>" in first and "stops" in second


async def test_a_fence_in_the_final_answer_after_commands_ran_is_the_answer() -> None:
    answer = "The tests pass. To run them again:\n```bash\npytest -q\n```"
    provider = ScriptedProvider([Reply("<cmd>true</cmd>"), Reply(answer)])
    result = await run(config_for(provider), [], "go")
    assert (result.stop_reason, result.response) == ("final", answer)


async def test_a_fence_in_a_resumed_conversation_that_ran_commands_is_the_answer() -> None:
    history = [
        Message(role="user", content="run the tests"),
        Message(role="assistant", content="<cmd>true</cmd>"),
        Message(role="user", content=format_results([Result(command="true", exit_code=0)])),
        Message(role="assistant", content="They pass."),
    ]
    answer = "Like this:\n```bash\ntrue\n```"
    provider = ScriptedProvider([Reply(answer)])
    result = await run(config_for(provider), history, "how do I run them?")
    assert (result.stop_reason, result.response) == ("final", answer)


async def test_a_fence_shown_next_to_real_blocks_is_not_run_nor_flagged(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    reply = f"For example:\n```bash\ntouch {marker}\n```\nBut first:\n<cmd>echo checking</cmd>"
    provider = ScriptedProvider([Reply(reply), Reply("done")])
    result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final"
    assert [r.stdout for r in result.steps[1].results] == ["checking\n"]
    assert "<cmd>ls</cmd>" not in result.steps[1].content
    assert not marker.exists()


async def test_a_python_fence_in_a_first_answer_is_the_answer() -> None:
    answer = "Use this:\n```python\nprint(sum(range(10)))\n```"
    provider = ScriptedProvider([Reply(answer)])
    result = await run(config_for(provider), [], "how do I sum 0..9 in Python?")
    assert (result.stop_reason, result.response) == ("final", answer)


async def test_a_fenced_command_from_a_real_server_gets_the_notice(
    sse_server: ScriptedServer,
) -> None:
    sse_server.enqueue(openai_stream("```bash\nls\n```"), openai_stream("Nothing to do."))
    async with OpenAIProvider(
        model="m", base_url=f"{sse_server.base_url}/v1", api_key="k"
    ) as provider:
        result = await run(config_for(provider), [], "go")
    assert result.stop_reason == "final"
    assert "<cmd>ls</cmd>" in sse_server.requests[1].json["messages"][-1]["content"]
