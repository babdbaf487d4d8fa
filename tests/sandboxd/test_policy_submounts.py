"""Mount points under a read-only grant, on the host: the policy lists each as a read-only
mount of its own (the engine binds grants recursively and keeps only the top read-only)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

import pytest

from sandboxd.policy.errors import PolicyError
from sandboxd.policy.pinned import identify
from sandboxd.policy.policy import MAX_SUBMOUNTS, GrantedPath, Policy
from tests.support.host_mounts import bound_at, tmpfs_at

POLICY = Policy(image="img:1")


def _granted(requested: list[tuple[Path, bool]]) -> tuple[GrantedPath, ...]:
    with POLICY.grant_paths([(str(p), ro) for p, ro in requested], caller_home=None) as grant:
        return grant.paths


def _read_only(path: Path) -> GrantedPath:
    return GrantedPath(str(path), read_only=True, identity=identify(str(path)))


def test_each_mount_point_under_a_read_only_grant_is_granted_read_only(tmp_path: Path) -> None:
    with tmpfs_at(tmp_path / "data") as data, tmpfs_at(data / "cache") as cache:
        (tmp_path / "src").mkdir()
        assert _granted([(tmp_path, True)]) == (
            _read_only(tmp_path),
            _read_only(data),
            _read_only(cache),
        )


def test_mount_points_with_escaped_names_are_found(tmp_path: Path) -> None:
    odd = tmp_path / "a b\tc\\d\ne"
    with tmpfs_at(odd):
        assert _granted([(tmp_path, True)]) == (_read_only(tmp_path), _read_only(odd))


def test_mount_points_under_a_read_write_grant_stay_as_the_host_has_them(
    tmp_path: Path,
) -> None:
    with tmpfs_at(tmp_path / "data"):
        (granted,) = _granted([(tmp_path, False)])
        assert granted.path == str(tmp_path) and not granted.read_only


def test_a_mount_point_belongs_to_the_innermost_grant(tmp_path: Path) -> None:
    writable, readable = tmp_path / "out", tmp_path / "out" / "in"
    with tmpfs_at(writable / "scratch"), tmpfs_at(readable / "cache") as cache:
        paths = _granted([(tmp_path, True), (writable, False), (readable, True)])
        assert [(g.path, g.read_only) for g in paths] == [
            (str(tmp_path), True),
            (str(writable), False),
            (str(readable), True),
            (str(cache), True),
        ]


def test_a_mount_point_granted_by_name_is_listed_once(tmp_path: Path) -> None:
    with tmpfs_at(tmp_path / "data") as data:
        assert _granted([(tmp_path, True), (data, True)]) == (
            _read_only(tmp_path),
            _read_only(data),
        )


def test_a_mount_point_hidden_by_another_mount_refuses_the_grant(tmp_path: Path) -> None:
    with ExitStack() as mounts:
        mounts.enter_context(tmpfs_at(tmp_path / "a" / "b"))
        mounts.enter_context(tmpfs_at(tmp_path / "a"))  # hides a/b: mountinfo still lists it
        with pytest.raises(PolicyError) as refused:
            _granted([(tmp_path, True)])
    error = refused.value
    assert (error.status, error.code) == (403, "submount_refused")
    assert error.message == (
        f"refused {tmp_path}: the mount point {tmp_path / 'a' / 'b'} inside it cannot be "
        "mounted read-only (it does not exist), so it would be writable in the sandbox: "
        "unmount it, or grant a directory that does not hold it"
    )


def test_a_mount_point_whose_name_is_not_utf8_refuses_the_grant(tmp_path: Path) -> None:
    """The engine's JSON API cannot carry such a name: a clear refusal, not a failed start."""
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    with tmpfs_at(odd), pytest.raises(PolicyError) as refused:
        _granted([(tmp_path, True)])
    assert (refused.value.status, refused.value.code) == (403, "submount_refused")
    assert refused.value.message.startswith(
        f"refused {tmp_path}: the mount point {tmp_path}/caf\\xe9 inside it has a name that "
        "is not UTF-8"
    )


def test_too_many_mount_points_beneath_read_only_paths_are_refused(tmp_path: Path) -> None:
    with ExitStack() as mounts:
        for index in range(MAX_SUBMOUNTS + 1):
            mounts.enter_context(tmpfs_at(tmp_path / f"m{index:03d}", options="size=4k"))
        with pytest.raises(PolicyError) as refused:
            _granted([(tmp_path, True)])
        assert len(_granted([(tmp_path, False)])) == 1  # read-write: as the host has them
    assert (refused.value.status, refused.value.code) == (422, "too_many_submounts")
    assert refused.value.message == (
        f"refused {tmp_path}: the read-only paths of this request hold {MAX_SUBMOUNTS + 1} "
        f"mount points, each to be mounted read-only too, and at most "
        f"{MAX_SUBMOUNTS} can be: grant directories that hold fewer"
    )


def test_a_bind_of_a_refused_place_beneath_a_grant_refuses_it(tmp_path: Path) -> None:
    """The rules look at names; a bind mount shows one place under another name."""
    policy = Policy(image="img:1", allowed_system_paths=(Path("/usr/share"),))
    project = tmp_path / "project"
    with bound_at(project / "etc", Path("/etc")):
        for read_only in (True, False):
            with pytest.raises(PolicyError) as refused:
                policy.grant_paths([(str(project), read_only)], caller_home=None)
            assert refused.value.message == (
                f"refused {project}: the mount point {project}/etc inside it shows /etc: the "
                "system directory /etc is never mountable; to mount it deliberately, list /etc "
                "in allowed_system_paths in the daemon's config"
            )
    with bound_at(project / "ssl", Path("/etc/ssl")), pytest.raises(PolicyError) as refused:
        policy.grant_paths([(str(project / "ssl"), True)], caller_home=None)
    assert refused.value.message.startswith(
        f"refused {project}/ssl: it is a mount that shows /etc/ssl: it is inside the system "
        "directory /etc"
    )
    licenses = project / "licenses"
    with (
        bound_at(licenses, Path("/usr/share/common-licenses")),
        policy.grant_paths([(str(project), True)], caller_home=None) as grant,
    ):
        assert [g.path for g in grant.paths] == [str(project), str(licenses)]


def test_a_bind_of_another_project_beneath_a_grant_is_fine(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with bound_at(tmp_path / "project" / "other", other) as bound:
        assert _granted([(tmp_path / "project", False)]) == (
            GrantedPath(str(tmp_path / "project"), False, identify(str(tmp_path / "project"))),
        )
        assert _granted([(bound, True)]) == (_read_only(bound),)
