"""The check-back and the grammar from the command line: the real `logos` command in a
subprocess against a real local HTTP server streaming scripted replies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from logos.agent.replies import LOCAL_MAX_TOKENS, LOCAL_TEMPERATURE
from logos.protocol.grammar import ACT_GRAMMAR, ANSWER_GRAMMAR, LOGOS_GRAMMAR
from logos.protocol.notices import CHECK_BACK_NOTICE
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES
from tests.support.cli_harness import Home, anthropic_env, logos, run_task, sent_messages
from tests.support.sse_server import ScriptedServer, anthropic_stream, openai_stream

pytestmark = pytest.mark.timeout(60)


def answer_twice(server: ScriptedServer, text: str) -> None:
    """The model answers `text` before any command ran, and again after the check-back."""
    server.enqueue(openai_stream(text), openai_stream(text))


def test_an_answer_before_any_command_is_checked_back_and_shows_as_the_notice_it_is(
    home: Home, sse_server: ScriptedServer
) -> None:
    answer_twice(sse_server, "The sum is 60.")
    done = run_task(home, sse_server, "--json", "sum it")
    assert done.returncode == 0, done.stderr
    assert sent_messages(sse_server, 1)[-1] == {"role": "user", "content": CHECK_BACK_NOTICE}
    events = [json.loads(line) for line in done.stdout.splitlines()]
    steps = [e["step"] for e in events if e["type"] == "step_end"]
    assert [s["role"] for s in steps] == ["assistant", "result", "assistant"]
    assert steps[1]["content"] == CHECK_BACK_NOTICE and steps[1]["results"] == []
    final = events[-1]
    assert final["response"] == "The sum is 60." and final["turns"] == 2
    assert final["usage"]["input_tokens"] == 2 * steps[0]["usage"]["input_tokens"]
    recorded = [r for r in home.run_records() if r["type"] == "step"]
    assert recorded[1]["content"] == CHECK_BACK_NOTICE


def test_people_see_the_check_back_as_a_note_to_the_model(
    home: Home, sse_server: ScriptedServer
) -> None:
    answer_twice(sse_server, "Paris.")
    done = run_task(home, sse_server, "capital?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Paris.\n"
    assert "note to the model: No command has run yet" in done.stderr


def test_the_check_back_is_turned_off_by_the_flag_or_the_config_file(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("One."))
    assert run_task(home, sse_server, "--no-check-back", "go").returncode == 0
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text("check_back = false\n")
    sse_server.enqueue(openai_stream("Two."))
    assert run_task(home, sse_server, "go").returncode == 0
    assert len(sse_server.requests) == 2
    answer_twice(sse_server, "Three.")
    assert run_task(home, sse_server, "--check-back", "go").returncode == 0
    assert len(sse_server.requests) == 4  # the flag wins over the file


LLAMA_CPP_MODELS = {"object": "list", "data": [{"id": "q.gguf", "owned_by": "llamacpp"}]}
"""What llama.cpp's server lists at GET /v1/models (its `owned_by` tells it apart)."""


def _compact_prompt(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0]["content"].startswith("You work in a Linux shell"))


def test_a_llama_cpp_server_gets_the_small_model_defaults_without_any_flag(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.models = LLAMA_CPP_MODELS
    sse_server.enqueue(
        openai_stream("<cmd>true</cmd>"), openai_stream("Done."), openai_stream("It ran true.")
    )
    done = logos(["--base-url", sse_server.base_url + "/v1", "--yes", "go"], home, home.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("It ran true.\n")
    first, second, third = (request.json for request in sse_server.requests)
    assert (first["grammar"], second["grammar"]) == (ACT_GRAMMAR, LOGOS_GRAMMAR)
    # The answer is asked again from the outputs alone (`logos.protocol.plain_answer`).
    assert third["grammar"] == ANSWER_GRAMMAR
    assert [m["role"] for m in third["messages"]] == ["system", "user"]
    assert third["messages"][1]["content"].endswith("Question: go")
    assert _compact_prompt(first) and first["temperature"] == LOCAL_TEMPERATURE
    assert first["max_tokens"] == LOCAL_MAX_TOKENS
    example = [m.content for m in SMALL_MODEL_EXAMPLES.turns("go")]
    assert [m["content"] for m in first["messages"][1:-1]] == example
    assert first["messages"][-1] == {"role": "user", "content": "go"}
    # The example is sent, never recorded: the run's own steps start with the task.
    steps = [r for r in home.run_records() if r["type"] == "step"]
    assert steps[0]["content"] == "<cmd>true</cmd>"


def test_other_servers_keep_the_full_prompt_and_free_replies(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(openai_stream("Done."))
    done = run_task(home, sse_server, "--no-check-back", "go")
    assert done.returncode == 0, done.stderr
    (body,) = (request.json for request in sse_server.requests)
    assert "grammar" not in body and "temperature" not in body and "max_tokens" not in body
    assert not _compact_prompt(body) and len(body["messages"]) == 2
    assert sse_server.model_requests  # the list asked, to tell which server this is


def test_each_small_model_default_is_turned_off_by_its_flag_or_the_config_file(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.models = LLAMA_CPP_MODELS
    env = home.env()
    args = ["--base-url", sse_server.base_url + "/v1", "--yes", "--no-check-back"]
    sse_server.enqueue(*(openai_stream("Done.") for _ in range(5)))
    assert logos([*args, "--no-grammar", "go"], home, env).returncode == 0
    assert logos([*args, "--no-first-block", "go"], home, env).returncode == 0
    assert (
        logos([*args, "--prompt-style", "full", "--temperature", "0.7", "go"], home, env).returncode
        == 0
    )
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text('grammar = "none"\nprompt_style = "full"\n')
    assert logos([*args, "go"], home, env).returncode == 0
    assert logos([*args, "--grammar", "go"], home, env).returncode == 0  # the flag wins
    bodies = [request.json for request in sse_server.requests]
    assert [body.get("grammar") for body in bodies] == [
        None,
        LOGOS_GRAMMAR,
        ACT_GRAMMAR,
        None,
        ACT_GRAMMAR,
    ]
    assert [_compact_prompt(body) for body in bodies] == [True, True, False, False, False]
    assert bodies[2]["temperature"] == 0.7 and len(bodies[2]["messages"]) == 2


def test_the_grammar_switch_sends_the_grammars_to_any_openai_compatible_server(
    home: Home, sse_server: ScriptedServer
) -> None:
    sse_server.enqueue(*(openai_stream("Done.") for _ in range(3)))
    assert run_task(home, sse_server, "--no-check-back", "--grammar", "go").returncode == 0
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text(
        'grammar = "logos"\nfirst_block = false\n[provider_options]\nseed = 3\n'
    )
    assert run_task(home, sse_server, "--no-check-back", "go").returncode == 0
    assert run_task(home, sse_server, "--no-check-back", "--no-grammar", "go").returncode == 0
    bodies = [request.json for request in sse_server.requests]
    assert [body.get("grammar") for body in bodies] == [ACT_GRAMMAR, LOGOS_GRAMMAR, None]
    assert bodies[1]["seed"] == 3
    assert not any(_compact_prompt(body) for body in bodies)  # not detected: full prompt


def test_a_grammar_for_an_api_that_refuses_it_is_a_clear_error(
    home: Home, sse_server: ScriptedServer
) -> None:
    cloud = logos(["--grammar", "--yes", "go"], home, home.env(OPENAI_API_KEY="k"))
    assert cloud.returncode == 2
    assert "--gguf" in cloud.stderr and "--base-url" in cloud.stderr and "OpenAI" in cloud.stderr
    sse_server.enqueue(anthropic_stream("Done."))
    other = logos(
        ["--model", "m", "--grammar", "--yes", "go"], home, anthropic_env(home, sse_server)
    )
    assert other.returncode == 2 and "Anthropic's API refuses a grammar" in other.stderr
    assert not sse_server.requests


def test_two_grammars_or_an_unknown_one_are_named(home: Home, sse_server: ScriptedServer) -> None:
    home.config_file.parent.mkdir(parents=True)
    home.config_file.write_text('[provider_options]\ngrammar = "root ::= [a-z]+"\n')
    both = run_task(home, sse_server, "--grammar", "go")
    assert both.returncode == 2 and "provider_options.grammar" in both.stderr
    first = run_task(home, sse_server, "--no-grammar", "--first-block", "go")
    assert first.returncode == 2 and "--first-block" in first.stderr
    home.config_file.write_text('grammar = "json"\n')
    unknown = run_task(home, sse_server, "go")
    assert unknown.returncode == 2
    assert "'grammar'" in unknown.stderr and "unknown grammar 'json'" in unknown.stderr
    assert not sse_server.requests
