"""A caller's ceiling (logos.ceiling): roots pinned when granted, and a path placed by walking up
from a descriptor of it, never by its name. The daemon's use of it, against the real engine,
is in tests/security/test_path_ceiling.py."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from logos.ceiling import (
    CeilingError,
    CeilingRoot,
    ceiling_of,
    early_refusal,
    holding_roots,
    outside_ceiling,
    pin_root,
)
from logos.options import AllowedPath, ExecOptions
from tests.support.host_mounts import bound_at, tmpfs_at


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/{inner/deep, file.txt, to-outside -> ../outside}, outside/secret.txt."""
    (tmp_path / "root" / "inner" / "deep").mkdir(parents=True)
    (tmp_path / "root" / "file.txt").write_text("in\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("out\n")
    (tmp_path / "root" / "to-outside").symlink_to("../outside")
    return tmp_path


def holders(path: Path, ceiling: tuple[CeilingRoot, ...]) -> tuple[CeilingRoot, ...]:
    fd = os.open(path, os.O_PATH | os.O_DIRECTORY)
    try:
        return holding_roots(fd, ceiling)
    finally:
        os.close(fd)


def test_a_root_is_pinned_by_the_identity_of_what_its_resolved_name_opens(tree: Path) -> None:
    link = tree / "link-to-root"
    link.symlink_to(tree / "root")
    root = pin_root(str(link), read_only=True)
    real = os.stat(tree / "root")
    assert root == CeilingRoot(str(tree / "root"), True, real.st_dev, real.st_ino)
    assert root.describe() == f"{tree / 'root'} (read-only)"
    ceiling = ceiling_of([AllowedPath(str(tree / "root"), read_only=False)])
    assert [(r.path, r.read_only, r.inode) for r in ceiling] == [
        (str(tree / "root"), False, real.st_ino)
    ]


def test_a_root_that_cannot_be_pinned_says_why(tree: Path) -> None:
    with pytest.raises(CeilingError, match="cannot be pinned: it does not exist; grant"):
        pin_root(str(tree / "missing"), read_only=True)
    (tree / "loop").symlink_to("loop")
    with pytest.raises(CeilingError, match="symlink loop"):
        pin_root(str(tree / "loop"), read_only=True)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tree / "sock"))
        with pytest.raises(CeilingError, match="neither a directory nor a regular file"):
            pin_root(str(tree / "sock"), read_only=True)


def test_a_walk_up_finds_every_root_above_and_none_beside(tree: Path) -> None:
    root = pin_root(str(tree / "root"), read_only=False)
    inner = pin_root(str(tree / "root" / "inner"), read_only=True)
    outside = pin_root(str(tree / "outside"), read_only=True)
    ceiling = (root, inner, outside)
    assert holders(tree / "root" / "inner" / "deep", ceiling) == (inner, root)
    assert holders(tree / "root", ceiling) == (root,)
    assert holders(tree / "outside", (root, inner)) == ()
    # WHY no name is trusted: a symlink inside a root leads to the directory it names.
    assert holders(tree / "root" / "to-outside", (root, inner)) == ()


def test_a_root_swapped_for_a_symlink_is_not_the_root_it_was(tree: Path) -> None:
    root = pin_root(str(tree / "root"), read_only=False)
    (tree / "root").rename(tree / "was-root")
    (tree / "root").symlink_to(tree / "outside")
    refused = early_refusal(str(tree / "root"), read_only=False, ceiling=(root,))
    assert refused is not None
    assert f"refused {tree / 'root'} (resolves to {tree / 'outside'}): it is outside" in refused
    assert f"({tree / 'root'} (read-write))" in refused
    assert early_refusal(str(tree / "was-root" / "inner"), read_only=False, ceiling=(root,)) is None


def test_a_walk_up_crosses_mounts_beneath_a_root(tree: Path) -> None:
    root = pin_root(str(tree / "root"), read_only=False)
    with tmpfs_at(tree / "root" / "inner" / "deep") as mounted:
        (mounted / "on-tmpfs").mkdir()
        assert holders(mounted / "on-tmpfs", (root,)) == (root,)
    with bound_at(tree / "root" / "inner" / "deep", tree / "outside") as bound:
        # What the host mounted beneath a root is in it (the sandbox gets it with the root);
        # the directory it shows, reached by its own name, is not.
        assert holders(bound, (root,)) == (root,)
        assert holders(tree / "outside", (root,)) == ()


def test_a_file_is_placed_by_its_directory_and_a_granted_file_holds_itself(tree: Path) -> None:
    root = pin_root(str(tree / "root"), read_only=True)
    assert early_refusal(str(tree / "root" / "file.txt"), read_only=True, ceiling=(root,)) is None
    secret = str(tree / "outside" / "secret.txt")
    assert early_refusal(secret, read_only=True, ceiling=(root,)) is not None
    granted = pin_root(secret, read_only=True)
    assert early_refusal(secret, read_only=True, ceiling=(root, granted)) is None


def test_access_is_at_most_a_holding_roots(tree: Path) -> None:
    read_only = pin_root(str(tree / "root"), read_only=True)
    inner = str(tree / "root" / "inner")
    refused = early_refusal(inner, read_only=False, ceiling=(read_only,))
    assert refused == (
        f"refused {inner} read-write: the paths granted to this caller hold it only read-only "
        f"({tree / 'root'} (read-only)); a caller can narrow its paths, never widen them: ask "
        "for it read-only"
    )
    assert early_refusal(inner, read_only=True, ceiling=(read_only,)) is None
    # Any read-write root holding it is enough, however deep a read-only one sits.
    writable = pin_root(str(tree), read_only=False)
    assert early_refusal(inner, read_only=False, ceiling=(read_only, writable)) is None


def test_an_early_check_of_a_path_that_cannot_be_looked_at_is_a_refusal(tree: Path) -> None:
    root = pin_root(str(tree / "root"), read_only=False)
    missing = str(tree / "root" / "missing")
    assert early_refusal(missing, read_only=True, ceiling=(root,)) == (
        f"refused {missing}: it does not exist; pass an existing path inside the granted ones"
    )
    assert early_refusal(str(tree / "root"), read_only=True, ceiling=()) == outside_ceiling(
        str(tree / "root"), str(tree / "root"), read_only=True, holders=(), ceiling=()
    )


def test_options_carry_a_ceiling_and_none_means_none() -> None:
    root = CeilingRoot("/srv/p", False, 1, 2)
    assert ExecOptions().path_ceiling is None
    assert ExecOptions(path_ceiling=(root,)).path_ceiling == (root,)
