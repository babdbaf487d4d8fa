"""Golden tests of the `<result>` envelope: the exact text the model reads.

Regenerate after an intended format change with
`LOGOS_UPDATE_GOLDEN=1 pytest tests/test_envelope.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logos import Result
from logos.envelope import command_preview, format_results

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
