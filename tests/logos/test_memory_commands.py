"""The model keeps memory notes with `remember`, `recall` and `forget`: driven by a scripted
model through the real loop, with a real notes file and real bash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logos import Config, ExecOptions, LocalRunner, run
from logos.agent.steps import RunResult
from logos.approvals.approval import ApprovalRunner, AutoApprover, NeverRunApprover
from logos.commands.memory import memory_commands
from logos.commands.memory_store import MemoryStore
from logos.protocol.prompt import build_system_prompt
from tests.support.cli_harness import Home, logos, make_home, openai_env
from tests.support.scripted import Reply, ScriptedProvider
from tests.support.sse_server import ScriptedServer, openai_stream

pytestmark = pytest.mark.anyio


async def _run(
    provider: ScriptedProvider, store: MemoryStore, *, approve: bool = True
) -> RunResult:
    approver = AutoApprover() if approve else NeverRunApprover()
    config = Config(
        provider=provider,
        system_prompt="test system prompt",
        runner=ApprovalRunner(LocalRunner(), approver),
        exec_options=ExecOptions(timeout_s=30.0),
        loop_commands=memory_commands(store),
    )
    try:
        return await run(config, [], "go")
    finally:
        await config.runner.aclose()


def _envelope(provider: ScriptedProvider, request: int) -> str:
    return provider.requests[request].messages[-1].content


async def test_the_model_remembers_recalls_and_forgets_a_note(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.json")
    provider = ScriptedProvider(
        [
            Reply("<cmd>remember Build Command: make -j4 test\nthen make lint</cmd>"),
            Reply('<cmd>recall</cmd>\n<cmd>recall "build command"</cmd>'),
            Reply("<cmd>forget build command</cmd>"),
            # Blocks of one message run at once: the check comes in a turn of its own.
            Reply("<cmd>recall build command</cmd>"),
            Reply("Done."),
        ]
    )
    result = await _run(provider, store)
    assert result.stop_reason == "final"

    saved = _envelope(provider, 1)
    assert "saved the note 'build command'" in saved
    [remember] = result.steps[1].results
    assert remember.ok
    listed, recalled = result.steps[3].results
    assert listed.stdout.startswith("1 note:\n- build command: make -j4 test …")
    assert recalled.stdout.startswith("build command (saved ")
    assert recalled.stdout.endswith(":\nmake -j4 test\nthen make lint\n")
    [forgot] = result.steps[5].results
    [missing] = result.steps[7].results
    assert forgot.stdout == "forgot the note 'build command'.\n"
    assert missing.error == "there is no note 'build command': `recall` lists the notes"
    assert store.notes() == []
    assert json.loads((tmp_path / "memory.json").read_text()) == {"notes": []}


async def test_saving_a_note_follows_the_approval_and_reading_does_not(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.json")
    store.remember("style", "tabs")
    provider = ScriptedProvider(
        [
            Reply(
                "<cmd>remember style: spaces</cmd>\n<cmd>forget style</cmd>\n"
                "<cmd>recall style</cmd>"
            ),
            Reply("Done."),
        ]
    )
    result = await _run(provider, store, approve=False)
    remember, forget, recall = result.steps[1].results
    assert remember.error and "not run" in remember.error
    assert forget.error and "not run" in forget.error
    assert recall.ok and recall.stdout.endswith(":\ntabs\n")
    assert [note.text for note in store.notes()] == ["tabs"]


async def test_a_form_it_cannot_read_is_answered_with_the_form_to_use(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.json")
    provider = ScriptedProvider(
        [
            Reply(
                "<cmd>remember make -j4 test</cmd>\n<cmd>forget</cmd>\n"
                "<cmd>recall a\nls</cmd>\n<cmd>remember : no key</cmd>"
            ),
            Reply("Done."),
        ]
    )
    result = await _run(provider, store)
    for misread in result.steps[1].results[:3]:
        assert misread.error is not None
        assert "write `remember KEY: TEXT`, `recall KEY`, `recall` or `forget KEY`" in misread.error
    no_key = result.steps[1].results[3]
    assert no_key.error is not None
    assert store.notes() == []


async def test_a_note_over_its_bound_is_refused_in_words(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.json")
    provider = ScriptedProvider(
        [Reply("<cmd>remember big: " + "x" * 5000 + "</cmd>"), Reply("Ok.")]
    )
    result = await _run(provider, store)
    [refused] = result.steps[1].results
    assert refused.error == (
        "the note 'big' has 5000 characters; at most 4000 fit: keep what matters"
    )
    assert store.notes() == []


async def test_the_same_words_inside_a_script_are_the_shells(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.json")
    provider = ScriptedProvider(
        [
            Reply(
                "<cmd>echo remember this: not a note</cmd>\n<cmd>remembers=1; echo $remembers</cmd>"
            ),
            Reply("Ok."),
        ]
    )
    result = await _run(provider, store)
    echoed, assigned = result.steps[1].results
    assert echoed.stdout == "remember this: not a note\n"
    assert assigned.stdout == "1\n"
    assert store.notes() == []


def test_the_system_prompt_teaches_the_commands_when_the_loop_builds_it(tmp_path: Path) -> None:
    writes, _ = memory_commands(MemoryStore(tmp_path / "memory.json"))
    prompt = build_system_prompt(working_dir=str(tmp_path), loop_commands=list(writes.usage))
    assert "`remember build command: make -j4 test`" in prompt
    assert "`recall` alone lists them" in prompt


@pytest.mark.timeout(60)
def test_a_note_the_model_saves_in_one_run_is_in_the_next_runs_prompt(
    tmp_path: Path, sse_server: ScriptedServer
) -> None:
    home: Home = make_home(tmp_path)
    env = openai_env(home, sse_server)
    sse_server.enqueue(
        openai_stream("<cmd>remember test command: pytest -q tests/</cmd>"),
        openai_stream("Saved."),
        openai_stream("Hello."),
    )
    first = logos(["--model", "m", "--no-check-back", "--approve", "auto", "learn"], home, env)
    assert first.returncode == 0, first.stderr
    assert (
        "`remember build command: make -j4 test`"
        in sse_server.requests[0].json["messages"][0]["content"]
    )
    listed = logos(["memory", "list"], home, env)
    assert listed.stdout.split("\t")[0] == "test command", listed.stdout
    second = logos(["--model", "m", "--no-check-back", "--approve", "auto", "hi"], home, env)
    assert second.returncode == 0, second.stderr
    assert (
        "- test command: pytest -q tests/" in sse_server.requests[2].json["messages"][0]["content"]
    )
