"""OutputCapture: cuts fall between whole lines when they can, the saved copy of a cut output
never claims more than it holds, and it is only ever written into a private directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from logos.runners.capture import OutputCapture, private_output_dir

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


def test_a_copy_that_cannot_be_written_is_not_reported_and_the_cut_says_why(
    tmp_path: Path,
) -> None:
    # A file size limit makes the write fail as a full disk would (in a child: the limit
    # must not touch this process's own files).
    script = textwrap.dedent(
        """
        import json, resource, signal, sys
        from logos.runners.capture import OutputCapture
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(sys.argv[2]) // 2, resource.RLIM_INFINITY))
        capture = OutputCapture(64, sys.argv[1], save_limit=len(sys.argv[2]))
        capture.write(sys.argv[2].encode())
        result = capture.finish()
        print(json.dumps([result.text, result.dropped_bytes, result.saved_path]))
        """
    )
    path = tmp_path / "out.txt"
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), FLOOD.decode()[:20_000]],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],  # `-c` imports this checkout's logos
    )
    text, dropped, saved_path = json.loads(done.stdout)
    assert dropped > 0 and saved_path is None
    assert f"no copy was saved: writing {path} failed: File too large" in text
    assert path.stat().st_size == 0


@pytest.mark.parametrize("planted", ["symlink", "open to all", "a file"])
def test_no_copy_is_saved_in_a_directory_that_is_not_private(tmp_path: Path, planted: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    directory = tmp_path / "logos-output"
    if planted == "symlink":
        directory.symlink_to(elsewhere)
    elif planted == "open to all":
        directory.mkdir(mode=0o777)
        directory.chmod(0o777)
    else:
        directory.write_text("")
    capture = OutputCapture(64, str(directory / "out.txt"), save_limit=len(FLOOD))
    capture.write(FLOOD)
    result = capture.finish()
    assert result.saved_path is None and list(elsewhere.iterdir()) == []
    assert f"no copy was saved: {directory} is " in result.text


def test_the_private_directory_is_created_closed_to_others(tmp_path: Path) -> None:
    directory = Path(private_output_dir(str(tmp_path)))
    capture = OutputCapture(64, str(directory / "out.txt"), save_limit=len(FLOOD))
    capture.write(FLOOD)
    result = capture.finish()
    assert directory.name == f"logos-output-{os.geteuid()}"
    assert directory.stat().st_mode & 0o777 == 0o700
    assert result.saved_path == str(directory / "out.txt")
    assert Path(result.saved_path).stat().st_mode & 0o777 == 0o600


def test_an_existing_file_is_never_written_through(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("someone else's")
    capture = OutputCapture(64, str(path), save_limit=len(FLOOD))
    capture.write(FLOOD)
    result = capture.finish()
    assert result.saved_path is None and path.read_text() == "someone else's"
    assert "no copy was saved: cannot create" in result.text


def test_discard_closes_and_removes_the_saved_copy(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    open_files = len(os.listdir("/proc/self/fd"))
    capture = OutputCapture(64, str(path), save_limit=len(FLOOD))
    capture.write(FLOOD)
    assert path.exists()
    capture.discard()
    assert not path.exists()
    assert len(os.listdir("/proc/self/fd")) == open_files
    capture.discard()  # harmless twice


def test_a_whole_copy_is_kept_and_reported_even_when_nothing_is_cut(tmp_path: Path) -> None:
    capture = OutputCapture(64, str(tmp_path / "job.txt"), save_limit=1000)
    capture.write(b"before\n")
    capture.save_whole()
    assert capture.saved_path == str(tmp_path / "job.txt")
    capture.write(b"after\n")
    so_far = capture.snapshot()
    assert (so_far.text, so_far.saved_path) == ("before\nafter\n", str(tmp_path / "job.txt"))
    result = capture.finish()
    assert result.text == "before\nafter\n" and result.dropped_bytes == 0
    assert result.saved_path is not None and result.saved_bytes == len(b"before\nafter\n")
    assert Path(result.saved_path).read_bytes() == b"before\nafter\n"


def test_skip_leaves_out_what_the_reader_has_seen() -> None:
    capture = OutputCapture(64)
    capture.write(b"seen 1\nseen 2\n")
    shown = capture.snapshot()
    assert shown.text == "seen 1\nseen 2\n"
    capture.write(b"new 1\nnew 2\n")
    assert capture.snapshot(skip=shown.total_bytes).text == "new 1\nnew 2\n"
    capture.write(FLOOD)
    later = capture.finish(skip=shown.total_bytes)
    head, marker_and_tail = later.text.split("[… ", 1)
    assert head.startswith("new 1\nnew 2\n") and "seen" not in later.text
    tail = marker_and_tail.split("…]\n", 1)[1]
    assert tail.endswith("line 009999\n")
    kept_head = len(head) - 1  # the marker starts on a line of its own
    assert later.dropped_bytes == capture.total_bytes - shown.total_bytes - kept_head - len(tail)


def test_skip_past_the_head_shows_the_omission_then_the_tail() -> None:
    capture = OutputCapture(64)
    capture.write(FLOOD[:50_000])
    seen = capture.total_bytes
    capture.write(FLOOD[50_000:])
    later = capture.finish(skip=seen)
    assert later.text.startswith("[… ") and later.text.endswith("line 009999\n")
    tail = later.text.split("…]\n", 1)[1]
    assert later.dropped_bytes == len(FLOOD) - seen - len(tail)


def test_skip_inside_the_head_keeps_the_rest_of_it() -> None:
    capture = OutputCapture(64)
    capture.write(b"0123456789\nabcdefghij\n")
    capture.write(FLOOD)
    result = capture.finish(skip=11)
    head, marker_and_tail = result.text.split("[… ", 1)
    assert head.startswith("abcdefghij\nline 0") and "0123456789" not in result.text
    tail = marker_and_tail.split("…]\n", 1)[1]
    assert result.dropped_bytes == capture.total_bytes - 11 - (len(head) - 1) - len(tail)


def test_skip_starts_at_a_whole_character() -> None:
    capture = OutputCapture(64)
    capture.write("é-after".encode())
    assert capture.finish(skip=1).text == "-after"
