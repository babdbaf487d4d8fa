"""Every text logos shows the model must be harmless if the model copies it into a reply.

Small models copy examples: one ran the system prompt's `cd app && make && ./run-tests` five
times in a run, and another harness's corrective message got its own example executed. So
the rendered system prompt, every notice of `logos.protocol.notices` and the messages that land in
an envelope (policy refusals, approval outcomes) are parsed as a reply would be, and every
command they would run, or show in inline code, must be on the list below.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Iterator

import pytest

from logos.approvals import approval
from logos.approvals.policy import check_command
from logos.commands.job_commands import job_usage
from logos.protocol import notices
from logos.protocol.fabricated_result import find_fabricated_result
from logos.protocol.fenced_command import find_fenced_command, looks_like_command
from logos.protocol.parse import CmdStreamParser, parse_cmd_blocks
from logos.protocol.project_commands import ProjectCommand
from logos.protocol.project_description import Description
from logos.protocol.prompt import build_system_prompt, load_template
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES
from logos.result import JobInfo

HARMLESS = {
    "ls": "lists the working directory",
    "head -n 40 README.md": "reads the start of a README (the compact prompt's example's first "
    "look); no README, an error",
    'grep -rn --exclude-dir=.git "high_tide" .': "searches the files for a name (the example of "
    "a question where something is defined): reads only",
    "git log -1 --stat --format=%s": "shows the last commit's message and files (the example of "
    "a question what changed); outside a repository, an error",
    "cd / && ls": "lists the root directory",
    "cd": "alone, in a fresh shell, changes nothing",
    "bash -c": "without a command: a usage error",
    "sed -i": "the default policy refuses it, so it never runs",
    "sed s/a/b/ notes.txt > notes.txt.new && mv notes.txt.new notes.txt": "the refusal of "
    "the sample `sed -i 's/a/b/' notes.txt` offers back the model's own edit through a new "
    "file: a copy does what the model itself asked for, visibly",
    "mkdir -p build/output": "offered back under the model's own `mkdir build/output` that "
    "stopped at a missing parent: a copy does what the model itself asked for",
    "awk '{s += $1} END {print s}' numbers.txt": "offered back under the model's own "
    "`sum numbers.txt`: a copy adds up what the model meant to, and changes nothing",
    "grep -rl TODO notes": "offered when the model names a file as the one that holds a word "
    "before any search: lists the names of the files that hold it, and changes nothing",
    "grep -rn format_price src": "the same, for where a name is defined: prints the lines "
    "that hold it, and changes nothing",
    "ls -S logs | head -n 1": "offered when the model names a file as the largest (smallest, "
    "newest, oldest) off a listing: prints the name of the one asked for, and changes nothing",
    "head -n 40 pyproject.toml": "reads the start of a Python project's manifest (the "
    "compact prompt's example of a first look with no README); no such file, an error",
    "head -n 40 package.json": "offered when a first look found no README and the listing "
    "shows package.json: reads the start of it; no such file, an error",
    "head -n 40 Cargo.toml": "the same for a Rust crate's manifest: reads only",
    "ls -l inbox": "offered when a first look found no README and the task names a directory "
    "the listing shows: lists it; no such directory, an error",
    "jobs": "answered by logos: lists the run's jobs",
    "wait %1": "answered by logos: waits for the run's own job 1, or says there is none",
    "kill %1": "answered by logos: stops only the run's own job 1, or says there is none",
}
"""Commands an example may show: they need no file and change nothing."""

NOTICE_ARGUMENTS: dict[str, list[object]] = {
    "missing": ["README.md", "count.txt", "PACKAGE.JSON"],
    "look": ["package.json", "Cargo.toml"],
    "named": ["React", "React, npm test"],
    "found": ["'<tool_call>'", "a command in a code fence ('ls')"],
    "repeat": [1, 2],
    "completed": [0, 2],
    "finish": [None, "stop", "length"],
    "times": [3, 7],
    "directories": [["logs/"], ["logs", "data"]],
    "directory": ["inbox"],
    "forced": [True, False],
    "task": ["How many lines does notes.txt have?"],
    "instead": ["mkdir -p build/output", "awk '{s += $1} END {print s}' numbers.txt"],
    "description": [
        Description("Converts temperatures between Celsius and Fahrenheit", "Cargo.toml")
    ],
    "commands": [
        [ProjectCommand("make test", "the Makefile's test target")],
        [
            ProjectCommand("npm test", "package.json's scripts"),
            ProjectCommand("go test ./...", "go.mod"),
        ],
    ],
    "asked": ["holds TODO", "is the largest"],
    "command": ["grep -rl TODO notes", "grep -rn format_price src", "ls -S logs | head -n 1"],
    "names": [[], ["notes/plan.md"], ["a.txt", "b.txt"]],
    "jobs": [
        [JobInfo("1", "make test", 45.0)],
        [JobInfo("1", "npm run build\nnpm test", 3.0), JobInfo("2", "ls", 120.0)],
    ],
}
"""Sample arguments for the notices' parameters, by name."""

ANSWER_VIEW_ONLY = {
    "project_commands_note": "the project's own commands, told in the plain answer view "
    "only, whose turn the answer grammar holds to prose: for the answer to name, not to run "
    "(the loop's test checks that the conversation never holds them)",
}
"""Notices shown only where no command runs (the project's description is checked as any
text: a sample holds no command): in inline code they may also show the commands
of their arguments, which the caller's project gave."""
PROJECT_COMMANDS = {c.command for given in NOTICE_ARGUMENTS["commands"] for c in given}

_INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def notice_texts() -> Iterator[tuple[str, str]]:
    """Every text of `logos.protocol.notices`: its constants, and its functions on every sample."""
    for name, value in vars(notices).items():
        if name.startswith("_"):
            continue
        if isinstance(value, str):
            yield name, value
        elif inspect.isfunction(value) and value.__module__ == notices.__name__:
            parameters = list(inspect.signature(value).parameters)
            missing = [p for p in parameters if p not in NOTICE_ARGUMENTS]
            assert not missing, f"add sample arguments for {name}({', '.join(missing)})"
            for arguments in itertools.product(*(NOTICE_ARGUMENTS[p] for p in parameters)):
                yield f"{name}{arguments}", value(*arguments)


def shown_texts() -> list[tuple[str, str]]:
    refusals = [check_command("sed -i 's/a/b/' notes.txt"), check_command("sh -c " * 40)]
    return [
        ("system prompt", build_system_prompt()),
        ("system prompt with jobs", build_system_prompt(loop_commands=job_usage(30))),
        ("system prompt template", load_template()),
        ("compact system prompt", build_system_prompt(style="compact")),
        ("compact template", load_template("compact")),
        # The example's result turn is the harness's own envelope, made by format_results;
        # the turns a model could copy are the task and the two replies.
        *(
            (f"worked example {example.task!r} {n}", m.content)
            for example in (*SMALL_MODEL_EXAMPLES.general, *SMALL_MODEL_EXAMPLES.kinds)
            for n, m in enumerate((*example.turns(), *example.answering_turns()))
            if not m.content.startswith("<result>")
        ),
        *notice_texts(),
        *((f"policy refusal {n}", text) for n, text in enumerate(refusals) if text is not None),
        ("never-run", approval.NEVER_RUN_ERROR),
        ("declined", approval.declined_error("not now")),
        ("edited", approval.EDITED_NOTE),
    ]


TEXTS = shown_texts()


def test_every_notice_is_checked() -> None:
    names = {name.split("(")[0] for name, _ in TEXTS}
    public = {name for name in vars(notices) if not name.startswith("_")}
    shown = {
        name
        for name in public
        if isinstance(getattr(notices, name), str)
        or getattr(getattr(notices, name), "__module__", None) == notices.__name__
    }
    assert shown <= names


@pytest.mark.parametrize(("name", "text"), TEXTS, ids=[name for name, _ in TEXTS])
def test_what_a_copy_would_run_is_harmless(name: str, text: str) -> None:
    for command in parse_cmd_blocks(text):
        assert command in HARMLESS, f"{name} would run {command!r} if the model copied it"
    parser = CmdStreamParser()
    parser.feed(text)
    parser.close()
    assert not parser.in_block, f"{name} opens a block that never closes: name the tag in words"


@pytest.mark.parametrize(("name", "text"), TEXTS, ids=[name for name, _ in TEXTS])
def test_commands_shown_as_inline_code_or_in_fences_are_harmless(name: str, text: str) -> None:
    for line in text.splitlines():
        for span in _INLINE_CODE.finditer(line):
            code = span.group(2).strip()
            if looks_like_command(code):
                given = PROJECT_COMMANDS if name.split("(")[0] in ANSWER_VIEW_ONLY else set()
                assert code in HARMLESS or code in given, f"{name} shows the command {code!r}"
    assert find_fenced_command(text) is None, f"{name} shows a command in a fence"


@pytest.mark.parametrize(("name", "text"), TEXTS, ids=[name for name, _ in TEXTS])
def test_a_copy_is_not_taken_for_a_made_up_result(name: str, text: str) -> None:
    assert find_fabricated_result(text) is None


def test_the_old_examples_would_have_been_caught() -> None:
    """The checks above catch what the issue saw: a placeholder in inline code, and a
    corrective message whose lone tag opens a block that runs its own words."""
    old_prompt_line = "put both in the same block: `cd app && make && ./run-tests`."
    [span] = _INLINE_CODE.findall(old_prompt_line)
    assert looks_like_command(span[1]) and span[1] not in HARMLESS
    old_notice = "To run a command, put it in a <cmd> block, for example <cmd>ls</cmd>."
    assert parse_cmd_blocks(old_notice) == ["block, for example <cmd>ls"]
