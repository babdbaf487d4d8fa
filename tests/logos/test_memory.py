"""The memory notes store: normalised keys, bounds, private atomic writes, several writers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from logos.commands.memory_store import (
    MAX_NOTES,
    MemoryStore,
    Note,
    NoteError,
    memory_prompt,
    normalize_key,
)
from logos.errors import RecordFileError

REPO = Path(__file__).resolve().parents[2]


def test_keys_are_trimmed_and_lower_case(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "state" / "memory.json")
    store.remember("  Deploy Steps ", "  run make deploy  ")
    assert store.recall("deploy steps") == store.recall("DEPLOY STEPS  ")
    note = store.recall("deploy steps")
    assert note is not None and note.text == "run make deploy"
    store.remember("deploy steps", "replaced")
    assert [n.text for n in store.notes()] == ["replaced"]
    assert store.forget(" DEPLOY steps") and not store.forget("deploy steps")
    assert (tmp_path / "state" / "memory.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("  ", "x", "needs a key"),
        ("a\nb", "x", "control characters"),
        ("k" * 101, "x", "at most 100 characters"),
        ("k", "   ", "is empty"),
        ("k", "x" * 4001, "at most 4000 fit"),
    ],
)
def test_bad_notes_are_refused(tmp_path: Path, key: str, text: str, message: str) -> None:
    with pytest.raises(NoteError, match=message):
        MemoryStore(tmp_path / "memory.json").remember(key, text)


def test_the_number_of_notes_is_bounded(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.json")
    for number in range(MAX_NOTES):
        store.remember(f"note {number}", "x")
    with pytest.raises(NoteError, match="forget one first"):
        store.remember("one more", "x")
    store.remember("note 3", "replacing is fine")


def test_a_damaged_file_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    path.write_text("{half")
    with pytest.raises(RecordFileError, match="fix or delete the file"):
        MemoryStore(path).notes()


@pytest.mark.timeout(60)
def test_two_processes_writing_at_once_lose_no_note(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    script = (
        "import sys; from pathlib import Path\n"
        "from logos.commands.memory_store import MemoryStore\n"
        "store = MemoryStore(Path(sys.argv[1]))\n"
        "for n in range(40): store.remember(f'{sys.argv[2]} {n}', 'x' * 500)\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(path), name], cwd=REPO)
        for name in ("left", "right")
    ]
    assert [writer.wait(60) for writer in writers] == [0, 0]
    assert len(MemoryStore(path).notes()) == 80
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".memory.json.")]


def test_the_prompt_section_is_bounded_and_names_what_it_leaves_out() -> None:
    notes = [Note(f"key {n}", "y" * 30, f"2026-01-0{n}") for n in range(9, 0, -1)]
    text = memory_prompt(notes, max_chars=90)
    assert "- key 9: " in text and "- key 8: " in text and "key 7: y" not in text
    assert "(7 older notes are left out to keep this prompt short: 'key 7', 'key 6'" in text
    assert memory_prompt([], 100) == ""
    assert normalize_key(" A ") == "a"
