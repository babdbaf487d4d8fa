"""Golden tests of the `<result>` envelope: the exact text the model reads.

Regenerate after an intended format change with
`LOGOS_UPDATE_GOLDEN=1 pytest tests/logos/test_envelope.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logos import Result
from logos.envelope import command_preview, elide_outputs, format_results

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


@pytest.mark.parametrize("name", sorted(CASES))
def test_envelope_matches_golden(name: str) -> None:
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
