"""OutputCapture: cuts fall between whole lines when they can, and the saved copy of a cut
output never claims more than it holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logos.capture import OutputCapture

FLOOD = b"".join(b"line %06d\n" % number for number in range(10_000))


def test_a_cut_falls_between_whole_lines() -> None:
    capture = OutputCapture(64)
    capture.write(FLOOD)
    result = capture.finish()
    head, _, tail = result.text.partition("[… ")
    assert head == "line 000000\nline 000001\n"  # not "line 0000" of the third line
    assert tail.split("\n", 1)[1] == "line 009998\nline 009999\n"  # not "009997\n"
    assert result.dropped_bytes == len(FLOOD) - len(head) - len("line 009997\n") * 2
    assert f"[… {result.dropped_bytes} bytes omitted …]\n" in result.text


def test_one_long_line_is_cut_where_the_limit_falls() -> None:
    capture = OutputCapture(64)
    capture.write(b"a" * 1000 + b"\n" + b"b" * 1000)
    result = capture.finish()
    assert result.text == "a" * 32 + "\n[… 1937 bytes omitted …]\n" + "b" * 32
    assert result.dropped_bytes == 1937


def test_a_cut_output_is_saved_whole_within_the_save_limit(tmp_path: Path) -> None:
    capture = OutputCapture(64, str(tmp_path / "out.txt"), save_limit=len(FLOOD))
    for start in range(0, len(FLOOD), 4096):
        capture.write(FLOOD[start : start + 4096])
    result = capture.finish()
    assert result.dropped_bytes > 0
    assert result.saved_path is not None and result.saved_bytes == len(FLOOD)
    assert Path(result.saved_path).read_bytes() == FLOOD


def test_a_copy_cut_short_by_the_save_limit_says_so_at_its_end(tmp_path: Path) -> None:
    save_limit = 1000
    capture = OutputCapture(64, str(tmp_path / "out.txt"), save_limit)
    capture.write(FLOOD)
    result = capture.finish()
    assert result.saved_path is not None
    saved = Path(result.saved_path).read_bytes()
    # WHY: without the note, `tail` of the file would show byte 1000 as the output's end.
    assert saved.startswith(FLOOD[:save_limit])
    note = saved[save_limit:].decode()
    assert f"{len(FLOOD) - save_limit} more bytes were not saved" in note
    assert note.endswith("]\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_copy_that_cannot_be_written_is_not_reported() -> None:
    capture = OutputCapture(64, "/dev/full", save_limit=len(FLOOD))
    capture.write(FLOOD)
    result = capture.finish()
    assert result.dropped_bytes > 0
    assert result.saved_path is None and result.saved_bytes == 0


def test_discard_closes_and_removes_the_saved_copy(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    capture = OutputCapture(64, str(path), save_limit=len(FLOOD))
    capture.write(FLOOD)
    assert path.exists()
    open_files = len(os.listdir("/proc/self/fd"))
    capture.discard()
    assert not path.exists()
    assert len(os.listdir("/proc/self/fd")) == open_files - 1
    capture.discard()  # harmless twice
