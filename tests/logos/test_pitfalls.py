"""Notes under blocks that fell into a well-known shell trap, through the real loop and bash."""

from __future__ import annotations

from pathlib import Path

import pytest

from logos import run
from logos.agent.replies import ReplyPolicy
from logos.options import AllowedPath, ExecOptions
from logos.protocol.grammar import ACT_GRAMMAR, LOGOS_GRAMMAR, ReplyGrammars
from logos.protocol.notices import (
    MKDIR_PARENTS_NOTE,
    SUM_IS_A_CHECKSUM_NOTE,
    WC_NAMES_THE_FILE_NOTE,
    read_a_directory_note,
    run_instead,
)
from logos.protocol.parse import parse_cmd_blocks
from logos.protocol.pitfalls import ADD_UP, pitfall_note, pitfall_notes
from logos.result import Result
from tests.support.scripted import Reply, ScriptedProvider, config_for, numbers_file

pytestmark = pytest.mark.anyio


def ran(command: str, *, stdout: str = "", stderr: str = "", exit_code: int = 0) -> Result:
    return Result(
        command=command, stdout=stdout, stderr=stderr, exit_code=exit_code, duration_s=0.01
    )


@pytest.mark.parametrize(
    "command",
    [
        "sum numbers.txt",
        "cat numbers.txt | sum",
        "cut -d, -f2 data.csv|sum",
        "echo $(sum numbers.txt)",
        "cd data && sum numbers.txt",
        "ls; sum a",
        "find . -name '*.txt' | xargs sum",
        "if true; then sum a; fi",
    ],
)
def test_the_sum_command_as_a_program_gets_the_checksum_note(command: str) -> None:
    note = pitfall_note(ran(command, stdout="40665     1\n"))
    assert note is not None and note.startswith(SUM_IS_A_CHECKSUM_NOTE)


@pytest.mark.parametrize(
    ("command", "instead"),
    [
        ("sum numbers.txt", f"{ADD_UP} numbers.txt"),
        ("sum a.txt b.txt", f"{ADD_UP} a.txt b.txt"),
        ("cat numbers.txt | sum", f"cat numbers.txt | {ADD_UP}"),
        ("cut -d, -f2 data.csv|sum", f"cut -d, -f2 data.csv | {ADD_UP}"),
        # Shapes it cannot rewrite surely: the note alone.
        ("sum -r numbers.txt", None),
        ("echo $(sum numbers.txt)", None),
        ("sum numbers.txt; ls", None),
        ("cat x || sum", None),
        ("sum numbers.txt > total.txt", None),
    ],
)
def test_a_lone_or_piped_sum_is_offered_back_as_an_addition(
    command: str, instead: str | None
) -> None:
    note = pitfall_note(ran(command))
    assert note is not None
    assert parse_cmd_blocks(note) == ([] if instead is None else [instead])


async def test_the_offered_addition_adds_up_in_bash(tmp_path: Path) -> None:
    (tmp_path / "numbers.txt").write_text("10\n20\n30\n")
    note = pitfall_note(ran("cat numbers.txt | sum"))
    assert note is not None
    [instead] = parse_cmd_blocks(note)
    provider = ScriptedProvider([Reply(f"<cmd>cd {tmp_path} && {instead}</cmd>"), Reply("60")])
    result = await run(config_for(provider), [], "add up")
    assert result.steps[1].results[0].stdout == "60\n"


@pytest.mark.parametrize(
    "command",
    [
        "awk '{s += $1} END {print s}' numbers.txt",
        "echo sum",
        "cat summary.txt",
        "md5sum a",
        "sha256sum a",
        "python3 -c 'print(sum([1, 2]))'",
        "grep -c sum notes.txt",
        "ls checksum/",
    ],
)
def test_sum_as_a_word_or_inside_another_name_gets_no_note(command: str) -> None:
    assert pitfall_note(ran(command)) is None


def test_mkdir_stopping_at_a_missing_parent_gets_the_parents_note() -> None:
    failed = ran(
        "mkdir build/output",
        stderr="mkdir: cannot create directory 'build/output': No such file or directory\n",
        exit_code=1,
    )
    assert pitfall_note(failed) == f"{MKDIR_PARENTS_NOTE} {run_instead('mkdir -p build/output')}"


@pytest.mark.parametrize(
    "command", ["mkdir -m 700 a/b", "mkdir a/b && cd a/b", "mkdir $(cat name)/x", "mkdir a/b>log"]
)
def test_a_mkdir_of_another_shape_gets_the_note_without_a_command(command: str) -> None:
    failed = ran(
        command,
        stderr="mkdir: cannot create directory 'a/b': No such file or directory\n",
        exit_code=1,
    )
    assert pitfall_note(failed) == MKDIR_PARENTS_NOTE


def test_mkdir_failing_for_another_reason_gets_no_note() -> None:
    exists = ran(
        "mkdir build",
        stderr="mkdir: cannot create directory 'build': File exists\n",
        exit_code=1,
    )
    assert pitfall_note(exists) is None


async def test_a_block_that_added_with_sum_is_noted_and_the_model_must_act_again(
    tmp_path: Path,
) -> None:
    numbers = numbers_file(tmp_path)
    provider = ScriptedProvider(
        [
            Reply(f"<cmd>sum {numbers}</cmd>"),
            Reply(f"<cmd>{ADD_UP} {numbers}</cmd>"),
            Reply("The total is 60."),
        ]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())),
        [],
        "add the numbers up",
    )
    assert result.response == "The total is 60."
    first, second = result.steps[1], result.steps[3]
    assert first.results[0].ok and SUM_IS_A_CHECKSUM_NOTE in first.content
    assert parse_cmd_blocks(first.content.split("note:")[1]) == [f"{ADD_UP} {numbers}"]
    assert second.results[0].stdout == "60\n" and "note:" not in second.content
    # The checksum "succeeded", yet the next turn is still an act turn: only the awk block
    # counts as having acted.
    grammars = [request.extra.get("grammar") for request in provider.requests]
    assert grammars == [ACT_GRAMMAR, ACT_GRAMMAR, LOGOS_GRAMMAR]


async def test_a_nested_mkdir_without_p_is_noted_with_its_error(tmp_path: Path) -> None:
    target = tmp_path / "build" / "output"
    provider = ScriptedProvider([Reply(f"<cmd>mkdir {target}</cmd>"), Reply("It cannot be done.")])
    result = await run(config_for(provider), [], "make the directory")
    envelope = result.steps[1]
    assert not envelope.results[0].ok
    assert "No such file or directory" in envelope.content
    assert MKDIR_PARENTS_NOTE in envelope.content
    assert f"<cmd>mkdir -p {target}</cmd>" in envelope.content


async def test_a_pitfall_note_joins_the_repeated_failure_note_under_one_block(
    tmp_path: Path,
) -> None:
    target = tmp_path / "a" / "b"
    provider = ScriptedProvider([Reply(f"<cmd>mkdir {target}</cmd>")] * 3 + [Reply("no")])
    result = await run(config_for(provider), [], "make it")
    third = result.steps[5].content
    assert MKDIR_PARENTS_NOTE in third and "3 times in a row" in third
    assert third.count("note:") == 1


def test_a_wc_count_of_a_named_file_written_into_a_file_is_offered_back_from_stdin() -> None:
    note = pitfall_note(ran("wc -w essay.txt > count.txt"))
    assert note == f"{WC_NAMES_THE_FILE_NOTE} {run_instead('wc -w < essay.txt > count.txt')}"


@pytest.mark.parametrize(
    "command",
    ["wc -l notes.txt", "wc -l < notes.txt > c.txt", "cat a | wc -l > c.txt", "wc -l a b > c"],
)
def test_a_wc_that_prints_or_reads_stdin_or_counts_several_files_gets_no_note(
    command: str,
) -> None:
    assert pitfall_note(ran(command)) is None


async def test_the_offered_count_holds_the_number_alone(tmp_path: Path) -> None:
    (tmp_path / "essay.txt").write_text("the river was cold\nwe forded it\n")
    provider = ScriptedProvider(
        [
            Reply("<cmd>wc -w essay.txt > count.txt</cmd>"),
            Reply(f"<cmd>{'wc -w < essay.txt > count.txt'}</cmd>"),
            Reply("Done."),
        ]
    )
    options = ExecOptions(allowed_paths=(AllowedPath(path=str(tmp_path), read_only=False),))
    config = config_for(
        provider, replies=ReplyPolicy(grammars=ReplyGrammars()), exec_options=options
    )
    result = await run(config, [], "write the number of words of essay.txt to count.txt")
    assert result.steps[1].block_notes[0].startswith(WC_NAMES_THE_FILE_NOTE)
    grammars = [request.extra.get("grammar") for request in provider.requests]
    assert grammars == [ACT_GRAMMAR, ACT_GRAMMAR, LOGOS_GRAMMAR]
    assert (tmp_path / "count.txt").read_text().strip() == "7"


def test_a_sum_of_nothing_beside_a_cat_of_one_file_is_offered_as_that_file_s_addition() -> None:
    """What the default model ran in one reply: `cat prices.txt` and `sum`."""
    shown = ran("cat prices.txt", stdout="15\n42\n")
    summed = ran("sum", stdout="00000     0\n")
    notes = pitfall_notes([shown, summed])
    assert notes == {1: f"{SUM_IS_A_CHECKSUM_NOTE} {run_instead(f'{ADD_UP} prices.txt')}"}
    two = ran("cat a.txt b.txt", stdout="1\n")
    assert pitfall_notes([two, summed]) == {1: SUM_IS_A_CHECKSUM_NOTE}


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("head -n 40 logs/", "head: error reading 'logs/': Is a directory"),
        ("tail logs/", "tail: error reading 'logs/': Is a directory"),
        ("cat logs/", "cat: logs/: Is a directory"),
        ("wc -l logs/", "wc: logs/: Is a directory"),
        ("grep size logs/", "grep: logs/: Is a directory"),
        ("sort logs/", "sort: read failed: logs/: Is a directory"),
    ],
)
def test_a_directory_given_to_a_command_that_reads_files_is_offered_back_listed(
    command: str, error: str
) -> None:
    note = pitfall_note(ran(command, stderr=f"{error}\n", exit_code=1))
    assert note == f"{read_a_directory_note(['logs/'])} {run_instead('ls -lS logs/')}"


def test_two_directories_read_get_the_note_without_a_command() -> None:
    both = "cat: logs: Is a directory\ncat: data: Is a directory\n"
    assert pitfall_note(ran("cat logs data", stderr=both, exit_code=1)) == read_a_directory_note(
        ["logs", "data"]
    )
    assert pitfall_note(ran("ls logs/", stdout="a.log\n")) is None


async def test_a_directory_read_as_a_file_is_noted_and_the_model_must_act_again(
    tmp_path: Path,
) -> None:
    """The default model, asked which file in the logs directory is the largest, ran
    `head -n 40 logs/` and answered "logs/"."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "big.log").write_text("x" * 500)
    provider = ScriptedProvider(
        [
            Reply(f"<cmd>cd {tmp_path} && ls</cmd>\n<cmd>head -n 40 {tmp_path}/logs/</cmd>"),
            Reply(f"<cmd>ls -lS {tmp_path}/logs/</cmd>"),
            Reply("big.log"),
        ]
    )
    result = await run(
        config_for(provider, replies=ReplyPolicy(grammars=ReplyGrammars())),
        [],
        "which file in the logs directory is the largest?",
    )
    envelope = result.steps[1].content
    assert "Is a directory" in envelope
    assert f"<cmd>ls -lS {tmp_path}/logs/</cmd>" in envelope
    assert " 500 " in result.steps[3].results[0].stdout
    grammars = [request.extra.get("grammar") for request in provider.requests]
    assert grammars == [ACT_GRAMMAR, ACT_GRAMMAR, LOGOS_GRAMMAR]
