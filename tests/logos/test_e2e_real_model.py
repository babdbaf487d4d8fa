"""End to end with a real model: llama.cpp serving a small GGUF, driven through the real CLI.

The model (SmolLM2-135M) is too weak to follow the `<cmd>` protocol on its own, so for the
proof of the full path its output is constrained by this test's llama.cpp grammar to "one
`<cmd>` block" or "an answer starting with Done" — sampling is still the model's. What is
proven on every run: the real server's streamed tokens reach the parser, the block's
command runs (local bash or sandboxd), and its `<result>` goes back to the model for
another turn. How often the model also does the work (hello.txt made by a command it ran)
is measured over the tries and reported, not asserted: with this test's grammar, with the
product's `--grammar`, and with none, the CLI's defaults (the check-back) on.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_harness import Home, logos, make_home
from tests.support.sandboxd_harness import Daemon

TRIES = int(os.environ.get("LOGOS_E2E_TRIES", "3"))
TASK = "Create a file named hello.txt that contains the word hello. Then say Done."
GRAMMAR = r"""
root ::= block | answer
block ::= "<cmd>" [a-zA-Z0-9 ._>/'"-]{1,60} "</cmd>"
answer ::= "Done" [a-zA-Z0-9 .,]{0,60}
"""
EXAMPLE = """Example of a whole exchange:
User: Create a file named a.txt containing hi
Assistant: <cmd>echo hi > a.txt</cmd>
User: <result>
<block index="1">
$ echo hi > a.txt
(no output)
</block>
</result>
Assistant: Done, a.txt contains hi.
Your first reply must be a <cmd> block; say Done only after you have seen its result."""


TEST_GRAMMAR = "test"
"""This test's own GRAMMAR, sent raw in `provider_options`; other names go to `grammar =`."""


@dataclass(frozen=True)
class Attempt:
    events: list[dict[str, Any]]
    made_file: bool
    """hello.txt exists and holds the word: the task's real work was done."""

    @property
    def answered(self) -> bool:
        return bool(self.events[-1]["stop_reason"] == "final")

    @property
    def completed(self) -> bool:
        return self.made_file and self.answered

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def ran_a_command(self) -> bool:
        """The runner executed a block (a result without `error`; any exit status)."""
        return any(event["result"]["error"] is None for event in self.of_type("command_result"))

    @property
    def did_the_work(self) -> bool:
        """hello.txt was made by a command the runner executed."""
        return self.made_file and self.ran_a_command


def attempt(
    tmp_path: Path, gguf: Path, seed: int, runner_args: list[str], grammar: str = TEST_GRAMMAR
) -> Attempt:
    directory = tmp_path / f"{grammar}-try-{seed}"
    directory.mkdir()
    home: Home = make_home(directory)
    home.config_file.parent.mkdir(parents=True)
    chosen = f"grammar = {json.dumps(grammar)}\n" if grammar != TEST_GRAMMAR else ""
    raw = f"grammar = {json.dumps(GRAMMAR)}\n" if grammar == TEST_GRAMMAR else ""
    home.config_file.write_text(
        f"temperature = 0.7\nprompt_extra = {json.dumps(EXAMPLE)}\n{chosen}"
        f"[provider_options]\nseed = {seed}\n{raw}"
    )
    args = ["--gguf", str(gguf), "--threads", "1", "--context-size", "4096", "--json"]
    args += ["--max-steps", "4", "--max-tokens", "48", *runner_args, TASK]
    done = logos(args, home, home.env(), timeout=280)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events and events[-1]["type"] == "done", done.stderr
    assert done.returncode in (0, 1), done.stderr  # a normal ending, final or a limit
    made = home.work / "hello.txt"
    return Attempt(events, made.is_file() and "hello" in made.read_text().lower())


def attempts_for(tmp_path: Path, gguf: Path, runner_args: list[str]) -> list[Attempt]:
    """TRIES attempts, and more (up to twice as many) while none has run a command yet.

    WHY: the tiny model writes a block first in roughly two tries out of three; extra
    tries keep the proof of the full path from failing on an unlucky draw, and the rate
    is reported over every try made.
    """
    attempts: list[Attempt] = []
    while len(attempts) < TRIES or (
        len(attempts) < 2 * TRIES + 2 and not any(one.ran_a_command for one in attempts)
    ):
        attempts.append(attempt(tmp_path, gguf, len(attempts), runner_args))
    return attempts


def check_full_path(attempts: list[Attempt]) -> None:
    """The model's streamed block was parsed and run, and its result went back for a turn."""
    for one in attempts:
        streamed = one.of_type("delta") or one.of_type("command_start")
        assert streamed, "no streamed text reached the parser"
        assert one.events[-1]["usage"]["output_tokens"] > 0
    ran = [one for one in attempts if one.ran_a_command]
    assert ran, "no block was run in any try (none written, or none could start)"
    for one in ran:
        executed = next(e for e in one.of_type("command_result") if e["result"]["error"] is None)
        command = executed["result"]["command"]
        steps = [(e["turn"], e["step"]) for e in one.of_type("step_end")]
        [written] = [s for t, s in steps if t == executed["turn"] and s["role"] == "assistant"]
        block = re.compile(rf"<cmd>\s*{re.escape(command)}\s*</cmd>")
        assert block.search(written["content"]), "the block is not the model's text"
        reported = [
            i
            for i, (t, s) in enumerate(steps)
            if t == executed["turn"]
            and s["role"] == "result"
            and f"\n$ {command}\n" in s["content"]
        ]
        assert reported, f"no <result> envelope reported {command!r}"
        later = [s["role"] for _, s in steps[reported[0] + 1 :]]
        assert "assistant" in later, "the result never went back to the model"


def report(capsys: pytest.CaptureFixture[str], where: str, attempts: list[Attempt]) -> None:
    tries = len(attempts)
    done = sum(one.completed for one in attempts)
    worked = sum(one.did_the_work for one in attempts)
    ran = sum(one.ran_a_command for one in attempts)
    commands = [event["command"] for one in attempts for event in one.of_type("command_start")]
    answers = [one.events[-1]["response"] for one in attempts if one.events[-1]["response"]]
    with capsys.disabled():
        print(
            f"\n[e2e real model, {where}] did the work (hello.txt made by a command it ran) in "
            f"{worked}/{tries} tries; task completed (that and a final answer) in {done}/{tries}; "
            f"a command ran and its result went back in {ran}/{tries}; "
            f"commands: {commands[:6]}; answers: {answers[:3]}"
        )


@pytest.mark.slow
@pytest.mark.llama
@pytest.mark.timeout(300 * (2 * TRIES + 2))
def test_real_model_with_local_bash(
    xllamacpp_installed: None, gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = attempts_for(tmp_path, gguf, ["--yes"])
    check_full_path(attempts)
    report(capsys, "local bash", attempts)


@pytest.mark.slow
@pytest.mark.llama
@pytest.mark.docker
@pytest.mark.timeout(300 * (2 * TRIES + 2))
def test_real_model_in_sandboxd(
    xllamacpp_installed: None,
    gguf: Path,
    daemon: Daemon,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sandbox = ["--sandbox", "--socket", str(daemon.socket)]
    attempts = attempts_for(tmp_path, gguf, sandbox)
    check_full_path(attempts)
    report(capsys, "sandboxd", attempts)


@pytest.mark.slow
@pytest.mark.llama
@pytest.mark.timeout(300 * TRIES)
@pytest.mark.parametrize("grammar", ["logos", "none"])
def test_real_model_with_and_without_the_product_grammar(
    xllamacpp_installed: None,
    gguf: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    grammar: str,
) -> None:
    """Reports how often the model does the work with `--grammar`'s grammar and without
    any; the same seeds as the tests above."""
    attempts = [attempt(tmp_path, gguf, seed, ["--yes"], grammar) for seed in range(TRIES)]
    report(capsys, f"local bash, grammar {grammar}", attempts)


def exchange(error: str | None) -> Attempt:
    """A try whose block (with the leading space the grammar allows) `error`ed or ran, its
    result sent back, then a final answer."""
    command = "echo hi > hello.txt"
    outcome = "error: " + error if error else "(no output)"
    envelope = f'<result>\n<block index="1">\n$ {command}\n{outcome}\n</block>\n</result>'
    result = {"command": command, "error": error, "exit_code": None if error else 0}
    return Attempt(
        [
            {"type": "command_start", "turn": 1, "index": 1, "command": command},
            {"type": "command_result", "turn": 1, "index": 1, "result": result},
            {
                "type": "step_end",
                "turn": 1,
                "step": {"role": "assistant", "content": f"<cmd> {command}</cmd>"},
            },
            {"type": "step_end", "turn": 1, "step": {"role": "result", "content": envelope}},
            {"type": "step_end", "turn": 2, "step": {"role": "assistant", "content": "Done."}},
            {
                "type": "done",
                "stop_reason": "final",
                "usage": {"output_tokens": 9},
                "response": "Done.",
            },
        ],
        made_file=error is None,
    )


def test_the_path_check_counts_only_a_block_the_runner_ran() -> None:
    check_full_path([exchange(None)])
    with pytest.raises(AssertionError, match="no block was run"):
        check_full_path([exchange("sandboxd is not running at /run/sandboxd.sock")])
