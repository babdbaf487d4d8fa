"""What a run changed in its writable paths, on real directories and a real git: the list of
files (added, modified, removed, renamed, binary) and each one's diff, through git where the
path is a work tree (the user's index, HEAD and objects untouched, the repository's config
never obeyed) and file by file elsewhere; every bound said when it is reached."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from logos.serve.filechanges.limits import ChangeLimits
from logos.serve.filechanges.tracker import ChangeTracker, TurnChanges, writable_roots
from logos.serve.filechanges.wire import ChangeList, FilesChanged

pytestmark = pytest.mark.anyio
CALC = "def add(a, b):\n    return a + b\n"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _repository(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q")
    (path / "calc.py").write_text(CALC)
    (path / "old.txt").write_text("to be removed\n")
    (path / "moved.txt").write_text("a file that only moves\n" * 20)
    (path / ".gitignore").write_text("build/\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "start")
    return path


def _fingerprint(repo: Path) -> tuple[str, str, int]:
    """The repository as the user has it: its index, its HEAD, how many objects it holds."""
    git = repo / ".git"
    objects = sum(len(files) for _, _, files in os.walk(git / "objects"))
    index = hashlib.sha256((git / "index").read_bytes()).hexdigest()
    return index, (git / "HEAD").read_text() + _git(repo, "rev-parse", "HEAD"), objects


def _edit_everything(root: Path) -> None:
    (root / "calc.py").write_text(CALC + "\n\ndef total(numbers):\n    return sum(numbers)\n")
    (root / "old.txt").unlink()
    (root / "moved.txt").rename(root / "renamed.txt")
    (root / "new.txt").write_text("brand new\n")
    (root / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "out.o").write_bytes(b"ignored by .gitignore")


def _by_path(listed: ChangeList) -> dict[str, tuple[str, str | None, bool]]:
    return {f.path: (f.status, f.old_path, f.binary) for f in listed.files}


async def _span(tracker: ChangeTracker, before: int) -> ChangeList:
    return await tracker.span("turn", "1", before, await tracker.mark())


async def test_git_lists_and_diffs_without_touching_the_users_repository(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    before_fingerprint = _fingerprint(repo)
    tracker = ChangeTracker(tmp_path / "store", [str(repo)])
    start = await tracker.mark()
    _edit_everything(repo)
    listed = await _span(tracker, start)
    assert _by_path(listed) == {
        "calc.py": ("modified", None, False),
        "old.txt": ("removed", None, False),
        "renamed.txt": ("renamed", "moved.txt", False),
        "new.txt": ("added", None, False),
        "image.bin": ("added", None, True),
    }
    calc = next(f for f in listed.files if f.path == "calc.py")
    assert (calc.added, calc.removed) == (4, 0)
    diff = await tracker.diff("turn", "1", str(repo), "calc.py")
    assert diff.kind == "git" and diff.status == "modified"
    assert diff.diff.startswith("--- a/calc.py\n+++ b/calc.py\n@@")
    assert "+def total(numbers):\n" in diff.diff
    binary = await tracker.diff("turn", "1", str(repo), "image.bin")
    assert binary.binary and binary.diff == "" and "binary" in binary.note
    removed = await tracker.diff("turn", "1", str(repo), "old.txt")
    assert "-to be removed" in removed.diff
    assert _fingerprint(repo) == before_fingerprint
    assert _git(repo, "status", "--porcelain").splitlines() == [
        " M calc.py",
        " D moved.txt",
        " D old.txt",
        "?? image.bin",
        "?? new.txt",
        "?? renamed.txt",
    ]


async def test_a_subdirectory_of_a_repository_is_compared_alone(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    tracker = ChangeTracker(tmp_path / "store", [str(repo / "pkg")])
    start = await tracker.mark()
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    (repo / "calc.py").write_text("outside the granted path\n")
    listed = await _span(tracker, start)
    assert _by_path(listed) == {"mod.py": ("modified", None, False)}
    diff = await tracker.diff("turn", "1", str(repo / "pkg"), "mod.py")
    assert "-x = 1\n+x = 2\n" in diff.diff


async def test_the_repositorys_config_is_never_obeyed(tmp_path: Path) -> None:
    """A sandboxed command may write .git/config: an fsmonitor hook or a filter driver there
    must not make the server run anything."""
    repo = _repository(tmp_path / "repo")
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    hook.chmod(0o755)
    tracker = ChangeTracker(tmp_path / "store", [str(repo)])
    start = await tracker.mark()
    config = repo / ".git" / "config"
    config.write_text(
        config.read_text()
        + f'[core]\n\tfsmonitor = {hook}\n[filter "evil"]\n\tclean = {hook}\n'
        + f'[diff "evil"]\n\ttextconv = {hook}\n'
    )
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (repo / "calc.py").write_text("changed\n")
    listed = await _span(tracker, start)
    await tracker.diff("turn", "1", str(repo), "calc.py")
    assert {f.path for f in listed.files} == {".gitattributes", "calc.py"}
    assert not marker.exists()
    _git(repo, "status")  # the user's own git obeys it: what the snapshots must not do
    assert marker.exists()


async def test_git_bounds_a_huge_change_and_a_huge_file(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    limits = ChangeLimits(max_entries=40, max_git_file_bytes=1000)
    tracker = ChangeTracker(tmp_path / "store", [str(repo)], limits)
    start = await tracker.mark()
    (repo / "big.log").write_text("x" * 5000)
    listed = await _span(tracker, start)
    assert _by_path(listed) == {"big.log": ("added", None, False)}
    stand_in = await tracker.diff("turn", "1", str(repo), "big.log")
    assert "not snapshotted: 5,000 bytes" in stand_in.diff
    many = repo / "many"
    many.mkdir()
    for number in range(50):
        (many / f"f{number}.txt").write_text(f"{number}\n")
    after = await tracker.mark()
    failed = await tracker.span("turn", "2", start, after)
    assert failed.files == []
    assert any("more than 40 new or changed files" in note for note in failed.notes)


async def test_plain_directories_list_and_diff_with_difflib(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    for name, text in (("calc.py", CALC), ("old.txt", "to be removed\n")):
        (root / name).write_text(text)
    (root / "moved.txt").write_text("a file that only moves\n" * 20)
    tracker = ChangeTracker(tmp_path / "store", [str(root)])
    start = await tracker.mark()
    _edit_everything(root)
    os.mkfifo(root / "a-fifo")  # WHY: reading one would block the server
    os.symlink("/etc/hostname", root / "outside")
    listed = await _span(tracker, start)
    assert _by_path(listed) == {
        "calc.py": ("modified", None, False),
        "old.txt": ("removed", None, False),
        "renamed.txt": ("renamed", "moved.txt", False),
        "new.txt": ("added", None, False),
        "image.bin": ("added", None, True),
        "build/out.o": ("added", None, False),
        "outside": ("added", None, False),
    }
    calc = next(f for f in listed.files if f.path == "calc.py")
    assert (calc.added, calc.removed) == (4, 0)
    diff = await tracker.diff("turn", "1", str(root), "calc.py")
    assert diff.kind == "files" and "+def total(numbers):\n" in diff.diff
    assert diff.diff.startswith("--- a/calc.py\n+++ b/calc.py\n")
    link = await tracker.diff("turn", "1", str(root), "outside")
    assert link.diff.endswith("+-> /etc/hostname\n")  # the link, never what it points to
    binary = await tracker.diff("turn", "1", str(root), "image.bin")
    assert binary.binary and binary.diff == ""
    gone = await tracker.diff("turn", "1", str(root), "old.txt")
    assert "+++ /dev/null" in gone.diff and "-to be removed" in gone.diff


async def test_plain_bounds_are_said(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    limits = ChangeLimits(max_entries=30, max_text_bytes=100, max_store_bytes=150)
    tracker = ChangeTracker(tmp_path / "store", [str(root)], limits)
    start = await tracker.mark()
    (root / "large.txt").write_text("y" * 500)
    (root / "fits.txt").write_text("z" * 90)
    (root / "fits-too.txt").write_text("w" * 90)
    listed = await _span(tracker, start)
    assert {f.path for f in listed.files} == {"large.txt", "fits.txt", "fits-too.txt"}
    large = await tracker.diff("turn", "1", str(root), "large.txt")
    assert large.diff == "" and large.note == (
        "its content was not kept (larger than 100 bytes): no diff"
    )
    assert any("reached their size limit (150 bytes)" in note for note in listed.notes)
    kept = [f.path for f in listed.files if f.added is not None]
    assert len(kept) == 1  # of the two that fit, the store held one
    for number in range(40):
        (root / f"n{number:02}.txt").write_text("n\n")
    huge = await tracker.span("turn", "2", start, await tracker.mark())
    assert any("more than 30 files and directories" in note for note in huge.notes)
    assert len(huge.files) < 40


async def test_turn_changes_publishes_only_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    published: list[FilesChanged] = []
    changes = TurnChanges(
        ChangeTracker(tmp_path / "store", [str(root)]),
        lambda event: published.append(event),  # type: ignore[arg-type]
    )
    await changes.begin()
    assert await changes.step("turn", "1") is None  # nothing written: no snapshot, no event
    (root / "a.txt").write_text("a\n")
    await changes.step("turn", "2")
    assert [(e.type, e.key, [f.path for f in e.files]) for e in published] == [
        ("files_changed", "2", ["a.txt"])
    ]


def test_only_writable_paths_are_tracked_once(tmp_path: Path) -> None:
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    assert writable_roots(
        [(str(tmp_path / "a"), False), (str(inner), False), (str(tmp_path), True)]
    ) == [str(tmp_path / "a")]
