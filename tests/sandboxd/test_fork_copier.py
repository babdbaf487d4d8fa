"""A fork's copier (sandboxd.inside.copier), run for real on this host as its container runs
it (`python3 -I -S -B -c SOURCE PLAN`), on real directories: what it copies, what it leaves
out, what it never follows, how it fails. No Docker needed (tests/sandboxd/test_fork.py and
tests/security/test_fork_containment.py fork real sandboxes).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandboxd.docker.container import usable_cpus
from sandboxd.docker.fork import COPIER_MEMORY_BASE, plan_copy
from sandboxd.docker.scratch import ScratchVolume
from sandboxd.inside import copier
from tests.support.host_mounts import tmpfs_at

SOURCE = Path(copier.__file__).read_text()


def run_copier(
    source: Path,
    targets: list[Path],
    *,
    skip: tuple[str, ...] = (),
    workers: int = 1,
    open_files: int | None = None,
) -> subprocess.CompletedProcess[str]:
    plan = {
        "places": [
            {
                "source": str(source),
                "targets": [str(target) for target in targets],
                "skip": list(skip),
                "name": "/tmp",
            }
        ],
        "workers": workers,
    }

    def limited() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    return subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", SOURCE, json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
    )


def copied(source: Path, targets: list[Path], **options: Any) -> dict[str, int]:
    """Run the copier, which must succeed; its summary."""
    ran = run_copier(source, targets, **options)
    assert ran.returncode == 0, ran.stderr
    summary: dict[str, int] = json.loads(ran.stdout)
    return summary


def places(tmp_path: Path, forks: int = 2) -> tuple[Path, list[Path]]:
    source = tmp_path / "source"
    source.mkdir()
    targets = [tmp_path / f"fork{n}" for n in range(forks)]
    for target in targets:
        target.mkdir()
    return source, targets


def tree(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under `root` by its path: kind, mode bits, content (a file's digest, a
    link's target), mtime (ns), and the first path of the same file (hard links)."""
    found: dict[str, tuple[object, ...]] = {}
    first: dict[int, str] = {}
    for top, dirs, files in os.walk(os.fsencode(root)):
        for name in sorted([*dirs, *files]):
            path = os.path.join(top, name)
            shown = os.fsdecode(os.path.relpath(path, os.fsencode(root)))
            info = os.lstat(path)
            content: object = None
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as data:
                    content = hashlib.sha256(data.read()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            same = first.setdefault(info.st_ino, shown) if stat.S_ISREG(info.st_mode) else None
            found[shown] = (
                stat.S_IFMT(info.st_mode),
                stat.S_IMODE(info.st_mode),
                content,
                info.st_mtime_ns if not stat.S_ISDIR(info.st_mode) else None,
                same,
            )
    return found


def test_files_directories_and_links_are_copied_with_their_modes_times_and_names(
    tmp_path: Path,
) -> None:
    source, targets = places(tmp_path)
    (source / "dir" / "sub").mkdir(parents=True)
    (source / "dir" / "sub" / "note.txt").write_text("hello\n")
    (source / "with space").mkdir()
    (source / "with space" / "a file").write_bytes(b"1")
    for odd in ("new\nline", "-dash", "tab\there", "esc\x1b[31m", "x" * 255):
        (source / odd).write_text(odd)
    (source / os.fsdecode(b"latin-\xe9")).write_bytes(b"not utf-8")
    (source / "empty").write_bytes(b"")
    for name, mode in (("none", 0o000), ("private", 0o600), ("run.sh", 0o755), ("all", 0o777)):
        (source / name).write_text(name)
        (source / name).chmod(mode)
    (source / "closed").mkdir(mode=0o711)
    (source / "read-only").mkdir()
    (source / "read-only" / "kept").write_text("kept\n")
    (source / "read-only").chmod(0o555)
    os.symlink("dir/sub/note.txt", source / "relative")
    os.symlink("/etc/passwd", source / "absolute")
    os.symlink("../../nowhere", source / "dangling")
    os.symlink(str(targets[1]), source / "at-a-fork")
    os.link(source / "run.sh", source / "dir" / "run-again")
    os.utime(source / "with space" / "a file", (981173106, 981173106))
    os.utime(source / "relative", (1014786307, 1014786307), follow_symlinks=False)
    summary = copied(source, targets)
    assert summary["left_out"] == 0 and summary["files"] == 14, summary
    expected = tree(source)
    for target in targets:
        assert tree(target) == expected
    # The directories' times too: set once their entries were in.
    assert (targets[0] / "with space").stat().st_mtime_ns == (
        (source / "with space").stat().st_mtime_ns
    )
    assert (targets[0] / "dir" / "run-again").stat().st_ino == (targets[0] / "run.sh").stat().st_ino
    assert os.readlink(targets[0] / "at-a-fork") == str(targets[1])  # a link, not followed


def test_setuid_and_setgid_bits_are_dropped_and_the_sticky_bit_kept(tmp_path: Path) -> None:
    source, targets = places(tmp_path, forks=1)
    (source / "shared").mkdir()
    (source / "shared").chmod(0o3777)
    modes = {"suid": 0o4755, "sgid": 0o2755, "both": 0o6777, "plain": 0o640, "sticky": 0o1644}
    for name, mode in modes.items():
        (source / name).write_text("#!/bin/sh\n")
        (source / name).chmod(mode)
    copied(source, targets)
    seen = {path.name: stat.S_IMODE(path.stat().st_mode) for path in targets[0].iterdir()}
    assert seen == {
        "shared": 0o1777,
        "suid": 0o755,
        "sgid": 0o755,
        "both": 0o777,
        "plain": 0o640,
        "sticky": 0o644,
    }


@pytest.mark.parametrize("workers", [1, 2])
def test_holes_stay_holes_and_the_data_between_them_is_copied(tmp_path: Path, workers: int) -> None:
    source, targets = places(tmp_path)
    sparse = source / "sparse"
    data = os.urandom(3 * 1024**2)
    with open(sparse, "wb") as file:
        file.truncate(1024**3)
        file.seek(100 * 1024**2)
        file.write(data)
        file.seek(900 * 1024**2)
        file.write(b"tail")
    summary = copied(source, targets, workers=workers)
    assert summary["bytes"] < 8 * 1024**2, summary
    for target in targets:
        made = target / "sparse"
        assert made.stat().st_size == 1024**3
        assert made.stat().st_blocks * 512 < 16 * 1024**2, "its holes were written out"
        with open(made, "rb") as file:
            file.seek(100 * 1024**2)
            assert file.read(len(data)) == data
            file.seek(900 * 1024**2)
            assert file.read(4) == b"tail"
            file.seek(500 * 1024**2)
            assert file.read(4096) == bytes(4096)


def test_fifos_and_sockets_are_left_out_and_counted(tmp_path: Path) -> None:
    source, targets = places(tmp_path, forks=1)
    os.mkfifo(source / "queue")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(source / "sock"))
    (source / "kept").write_text("kept\n")
    try:
        summary = copied(source, targets)
    finally:
        listening.close()
    assert summary["left_out"] == 2, summary
    assert [path.name for path in targets[0].iterdir()] == ["kept"]


def test_the_entries_named_to_skip_are_left_out_at_the_top_only(tmp_path: Path) -> None:
    source, targets = places(tmp_path, forks=1)
    (source / "mounted" / "deep").mkdir(parents=True)
    (source / "mounted" / "deep" / "x").write_text("x")
    (source / "other" / "mounted").mkdir(parents=True)
    copied(source, targets, skip=("mounted",))
    assert sorted(str(p.relative_to(targets[0])) for p in targets[0].rglob("*")) == [
        "other",
        "other/mounted",
    ]


def test_a_forks_entries_made_by_its_start_are_replaced_never_followed(tmp_path: Path) -> None:
    """A fork's own start may have made a name the copy brings (its $HOME under /tmp, its
    saved outputs' directory): a directory there is kept, anything else replaced, and a
    symlink there is never followed."""
    source, targets = places(tmp_path, forks=1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("outside\n")
    (source / "home" / "sub").mkdir(parents=True)
    (source / "home" / "sub" / "rc").write_text("rc\n")
    (source / "home" / "profile").write_text("session\n")
    (source / "f").write_text("session\n")
    (source / "d").mkdir()
    (source / "d" / "f").write_text("session\n")
    (targets[0] / "home").mkdir()
    (targets[0] / "home" / "made-by-the-fork").write_text("mine\n")
    os.symlink(outside / "f", targets[0] / "home" / "profile")
    os.symlink(outside, targets[0] / "home" / "sub")
    os.symlink(outside / "f", targets[0] / "f")
    os.symlink(outside, targets[0] / "d")
    copied(source, targets)
    assert sorted(p.name for p in outside.iterdir()) == ["f"]
    assert (outside / "f").read_text() == "outside\n"
    assert not (targets[0] / "f").is_symlink() and (targets[0] / "f").read_text() == "session\n"
    assert not (targets[0] / "d").is_symlink() and (targets[0] / "d" / "f").exists()
    assert (targets[0] / "home" / "sub" / "rc").read_text() == "rc\n"
    assert not (targets[0] / "home" / "sub").is_symlink()
    assert (targets[0] / "home" / "profile").read_text() == "session\n"
    assert (targets[0] / "home" / "made-by-the-fork").exists()


@pytest.fixture
def nest_place() -> Iterator[Path]:
    """A tmpfs of its own for a deep nest, gone with its unmount. WHY not tmp_path: Python's
    rmtree recurses, so pytest's clean-up of old runs (shared by every test run on this
    machine) would fail on it, and `rm -rf` takes quadratic time on it."""
    made = Path(tempfile.mkdtemp(prefix="copier-nest-"))
    try:
        with tmpfs_at(made, options="size=64m"):
            yield made
    finally:
        made.rmdir()


def test_a_nest_deeper_than_python_recursion_and_path_max_is_copied(nest_place: Path) -> None:
    source, targets = places(nest_place, forks=1)
    depth = 3000  # "d/" * 3000: 6000 bytes, past PATH_MAX (4096)
    level = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=level)
        deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=level)
        os.close(level)
        level = deeper
    fd = os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=level)
    os.write(fd, b"reached\n")
    os.close(fd)
    os.close(level)
    copied(source, targets)
    level = os.open(targets[0], os.O_RDONLY | os.O_DIRECTORY)
    found = 0
    while "d" in os.listdir(level):
        deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=level)
        os.close(level)
        level = deeper
        found += 1
    fd = os.open("bottom", os.O_RDONLY, dir_fd=level)
    try:
        assert (found, os.read(fd, 100)) == (depth, b"reached\n")
    finally:
        os.close(fd)
        os.close(level)


def make_nest(top: Path, depth: int) -> None:
    level = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=level)
        deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=level)
        os.close(level)
        level = deeper
    os.close(level)


def test_neither_depth_nor_many_linked_files_run_into_the_open_files_limit(
    nest_place: Path,
) -> None:
    """With 128 open files: a nest of 500 (a descriptor per level and fork would take 1,500)
    and 200 files with two names each into 3 forks (remembering each would take 600): all
    copied; the links kept while descriptors allow, the further names copied as files."""
    source, targets = places(nest_place, forks=3)
    make_nest(source, 500)
    for n in range(200):
        (source / f"f{n}").write_text(str(n))
        os.link(source / f"f{n}", source / f"g{n}")
    copied(source, targets, open_files=128)
    for target in targets:
        assert (target / ("d/" * 500).rstrip("/")).is_dir()
        assert [(target / f"g{n}").read_text() for n in range(200)] == [str(n) for n in range(200)]
    linked = sum((targets[0] / f"g{n}").stat().st_nlink == 2 for n in range(200))
    assert 0 < linked < 200, linked


def test_a_full_fork_fails_the_copy_naming_the_file_escaped(tmp_path: Path) -> None:
    source, _ = places(tmp_path, forks=0)
    odd = "big\nname\x1b[31m"
    (source / odd).write_bytes(os.urandom(2 * 1024**2))
    with tmpfs_at(tmp_path / "small") as small:
        ran = run_copier(source, [small])
    assert ran.returncode == copier.FAILED_EXIT
    message = ran.stderr.strip()
    assert "\n" not in message and "\x1b" not in message, message
    assert message == (
        "/tmp/big\\nname\\x1b[31m could not be copied: a fork's /tmp is full (forks have the "
        "session's sizes; a file with holes is copied with them)"
    )


@pytest.mark.parametrize("plan", ["", "not json", "[]", '{"places": 3}'])
def test_a_malformed_plan_is_a_usage_error(plan: str) -> None:
    ran = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", SOURCE, plan],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == copier.USAGE_EXIT and "plan is malformed" in ran.stderr, ran


def test_a_plan_copies_each_place_into_the_forks_that_have_it_and_skips_mount_points() -> None:
    """The second fork mounts /home (its $HOME lives under /tmp): it gets the session's /tmp
    only. Mounts under a place (the session's or the forks') are left out at its top; the
    copier's memory covers what it may write, a quarter more, and itself."""
    mib = 1024**2

    def volume(place: str, name: str, size: int) -> ScratchVolume:
        return ScratchVolume(place, name, size, "mode=1777")

    source = [volume("/tmp", "s.tmp", 512 * mib), volume("/home/sandbox", "s.home", 128 * mib)]
    first = [volume("/tmp", "a.tmp", 512 * mib), volume("/home/sandbox", "a.home", 128 * mib)]
    second = [volume("/tmp", "b.tmp", 512 * mib)]
    mounts = ["/tmp/work", "/tmp/a/b", "/var/x", "/home/sandbox/proj/src", "/home"]
    plan = plan_copy(source, [first, second], mounts=mounts, user="1000:1000", cpus=1.0)
    assert [(p.source.name, [t.name for t in p.targets], p.skip) for p in plan.places] == [
        ("s.tmp", ["a.tmp", "b.tmp"], ("a", "work")),
        ("s.home", ["a.home"], ("proj",)),
    ]
    assert plan.memory == COPIER_MEMORY_BASE + (1152 * mib) * 5 // 4
    assert plan.cpus == usable_cpus(2.0) and plan.user == "1000:1000"
    assert plan_copy(source, [[]], mounts=[], user="1000:1000", cpus=1.0).places == ()
