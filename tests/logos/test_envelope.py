"""Golden tests of the `<result>` envelope: the exact text the model reads.

Regenerate after an intended format change with
`LOGOS_UPDATE_GOLDEN=1 pytest tests/logos/test_envelope.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logos import Result
from logos.protocol.envelope import command_preview, elide_outputs, format_results
from logos.result import JobEnd, JobStarted

GOLDEN = Path(__file__).parent / "golden"

CASES: dict[str, list[Result]] = {
    "success": [Result(command="ls", stdout="README.md\nsrc\n", exit_code=0, duration_s=0.01)],
    "failure": [
        Result(
            command="grep -n TODO missing.txt",
            stderr="grep: missing.txt: No such file or directory\n",
            exit_code=2,
        )
    ],
    "timeout": [
        Result(
            command="python3 server.py",
            stdout="listening on 8000\n",
            timed_out=True,
            signal=15,
            duration_s=5.02,
        )
    ],
    "truncated": [
        Result(
            command="cat build.log",
            stdout="line 1\nline 2\n[… 1048576 bytes omitted …]\nline 99999\nline 100000\n",
            exit_code=0,
            stdout_dropped_bytes=1048576,
            stdout_file="/tmp/logos-output-x/0001-stdout.txt",
        )
    ],
    "mixed": [
        Result(command="true", exit_code=0),
        Result(command="kill -9 $$", signal=9),
        Result(command="python3 -c 'x = bytearray(10**10)'", oom_killed=True, signal=9),
        Result(command="sed -i 's/a/b/' f", error="refused by policy: use a heredoc"),
        Result(command="ls", error="sandbox unreachable: start it with `sandboxd serve`"),
        Result(command='echo "<b>" &&\nmake test', stdout="<b>\n", exit_code=137),
        Result(command="printf partial", stdout="partial", exit_code=0),
    ],
}


JOB_FILES = ("/tmp/logos-output-x/0003-stdout.txt", "/tmp/logos-output-x/0004-stderr.txt")
JOB_CASE = (
    [
        Result(command="echo quick", stdout="quick\n", exit_code=0),
        Result(
            command="make test",
            stdout="compiling\n",
            duration_s=30.01,
            job=JobStarted("2", *JOB_FILES),
        ),
        Result(command="sleep 60", duration_s=30.0, job=JobStarted("3", None, None)),
    ],
    [
        JobEnd(
            "1", Result(command="npm install", stdout="added 12\n", exit_code=0, duration_s=71.2)
        ),
        JobEnd(
            "2",
            Result(
                command="make test",
                stdout="[… 20 bytes omitted …]\n3 failed\n",
                stdout_dropped_bytes=20,
                exit_code=2,
                duration_s=95.4,
                stdout_file=JOB_FILES[0],
                stderr_file=JOB_FILES[1],
            ),
        ),
        JobEnd("4", Result(command="python3 serve.py", signal=15, duration_s=4.0)),
        JobEnd(
            "5",
            Result(command="pytest -x", timed_out=True, signal=15, duration_s=120.0),
        ),
    ],
)


@pytest.mark.parametrize("name", [*sorted(CASES), "jobs"])
def test_envelope_matches_golden(name: str) -> None:
    if name == "jobs":
        results, ends = JOB_CASE
        rendered = format_results(results, job_ends=ends)
    else:
        rendered = format_results(CASES[name])
    golden = GOLDEN / f"envelope_{name}.txt"
    if os.environ.get("LOGOS_UPDATE_GOLDEN"):
        golden.write_text(rendered + "\n", encoding="utf-8")
    assert rendered + "\n" == golden.read_text(encoding="utf-8")


def test_every_block_is_labelled_in_order() -> None:
    rendered = format_results([Result(command=f"echo {i}", exit_code=0) for i in range(1, 4)])
    positions = [rendered.index(f'<block index="{i}">\n$ echo {i}\n') for i in (1, 2, 3)]
    assert positions == sorted(positions)
    assert rendered.startswith("<result>\n") and rendered.endswith("\n</result>")


def test_command_preview_is_first_line_shortened() -> None:
    assert command_preview("  cat <<'EOF' > f\nbody\nEOF") == "cat <<'EOF' > f …"
    assert command_preview("x" * 500) == "x" * 119 + " …"


def test_every_body_is_elided_and_the_shape_kept() -> None:
    results = [
        Result(command="make", stdout="o" * 900 + "\n", stderr="e" * 700 + "\n", exit_code=2),
        Result(command="ls", stdout="a\nb\n", exit_code=0),
    ]
    elided = format_results(results, elide_output=True)
    assert "o" * 10 not in elided and "e" * 10 not in elided
    assert "901 bytes" in elided and "701 bytes" in elided and "4 bytes" in elided
    for kept in ('<block index="1">', "$ make", "exit code 2", '<block index="2">', "$ ls"):
        assert kept in elided
    assert elided.count("<stdout>") == elided.count("</stdout>") == 2
    assert elided.count("<stderr>") == elided.count("</stderr>") == 1


def test_output_that_holds_a_closing_tag_is_elided_whole() -> None:
    # A file about envelopes (or an XML log) can hold a line "</stdout>" of its own.
    stray = "<log>\n<stdout>\nold\n</stdout>\n</log>\n" + "x" * 5000 + "\n"
    results = [Result(command="cat log.xml", stdout=stray, exit_code=0)]
    elided = format_results(results, elide_output=True)
    assert "x" * 10 not in elided and "<log>" not in elided
    assert f"{len(stray)} bytes" in elided
    assert elided.count("</stdout>") == 1


def test_output_that_mimics_the_envelope_still_shrinks() -> None:
    mimic = "head\n</stdout>\n<stderr>\nnot the real stderr\n" + "x" * 5000 + "\n"
    results = [
        Result(command="cat fake.txt", stdout=mimic, stderr="warning\n", exit_code=0),
        Result(command="true", stdout="y" * 3000, exit_code=0),
    ]
    elided = format_results(results, elide_output=True)
    assert "x" * 10 not in elided and "y" * 10 not in elided and "warning" not in elided
    assert len(elided) < 1000


def test_cut_notes_stay_after_their_stream() -> None:
    result = Result(
        command="yes | head -c 99999",
        stdout="y\n" * 2000,
        stdout_dropped_bytes=95999,
        exit_code=0,
    )
    elided = format_results([result], elide_output=True)
    assert "y\ny\n" not in elided
    assert "note: stdout was cut: 95999 bytes omitted" in elided


def test_a_result_message_is_elided_with_its_notices_kept() -> None:
    results = [Result(command="cat big", stdout="z" * 4000, exit_code=0)]
    notice = "You started writing a <result> yourself; it was discarded."
    content = format_results(results) + "\n\n" + notice
    elided = elide_outputs(content, results)
    assert elided == format_results(results, elide_output=True) + "\n\n" + notice
    assert elide_outputs(notice, []) is None  # a notice alone has no output
    assert elide_outputs(format_results([Result(command="true")]), [Result(command="true")]) is None
    assert elide_outputs("an envelope of another logos", results) is None


def test_job_ends_are_elided_too_and_an_envelope_may_hold_only_them() -> None:
    end = JobEnd("1", Result(command="make", stdout="o" * 900 + "\n", exit_code=0))
    envelope = format_results([], job_ends=[end])
    assert envelope.startswith('<result>\n<job id="1">\n$ make\njob 1 ended after 0.0 s\n')
    elided = elide_outputs(envelope, [], job_ends=[end])
    assert elided is not None and "o" * 10 not in elided and "901 bytes" in elided
