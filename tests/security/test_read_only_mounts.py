"""Attack: write through a read-only grant into a file system mounted beneath it.

The engine bind-mounts a granted directory recursively (every mount under it comes along) and
this engine makes only the top of it read-only, so a tmpfs, a USB stick or a network share
mounted inside a read-only project stayed writable in the sandbox. Each mount point beneath
a read-only grant must be read-only there too; mounts made on the host after the sandbox
started never reach it (binds are rprivate); a read-write grant keeps its mount points as the
host has them.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.backend import ExecRequest, Mount, MountChangedError, SandboxSpec
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import LABEL_SESSION
from sandboxd.policy.pinned import identify
from sandboxd.policy.policy import Policy
from tests.support.host_mounts import tmpfs_at
from tests.support.parts import SANDBOX_IMAGE
from tests.support.sandboxd_harness import Daemon, run_with_paths, short_dir

pytestmark = pytest.mark.docker

POLICY = Policy(image=SANDBOX_IMAGE)

TRY_WRITE = """for d; do
  if touch "$d/planted" 2>/dev/null; then printf 'wrote %s\\n' "$d"
  else printf 'refused %s\\n' "$d"; fi
done"""


def _run(daemon: Daemon, command: str, paths: Sequence[tuple[Path, bool]], session: str) -> str:
    response = run_with_paths(daemon, command, paths, session=session)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["error"] is None, body
    return str(body["stdout"])


def _try_writes(
    daemon: Daemon, targets: Sequence[Path], paths: Sequence[tuple[Path, bool]], session: str
) -> list[str]:
    quoted = " ".join(shlex.quote(str(t)) for t in targets)
    return _run(daemon, f"sh -c {shlex.quote(TRY_WRITE)} sh {quoted}", paths, session).splitlines()


def test_mount_points_under_a_read_only_grant_are_read_only(daemon: Daemon) -> None:
    project = short_dir("ro")
    data, cache, odd = project / "data", project / "data" / "cache", project / "a b\\c"
    with ExitStack() as mounts:
        for point in (data, cache, odd):
            mounts.enter_context(tmpfs_at(point))
        (cache / "kept").write_text("readable\n")
        seen = _try_writes(daemon, [project, data, cache, odd], [(project, True)], "ro-below")
        assert seen == [f"refused {p}" for p in (project, data, cache, odd)]
        assert _run(daemon, f"cat {cache}/kept", [(project, True)], "ro-below") == "readable\n"
        audited = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
        last = next(line for line in reversed(audited) if line.get("session") == "ro-below")
        assert [(m["path"], m["read_only"]) for m in last["mounts"]] == [
            (str(p), True) for p in (project, odd, data, cache)
        ]
        assert not any(
            p.exists()
            for p in (project / "planted", data / "planted", cache / "planted", odd / "planted")
        )


def test_a_mount_made_after_the_sandbox_started_never_reaches_it(daemon: Daemon) -> None:
    """Binds are rprivate: a running sandbox keeps the tree it started with. The next request
    finds the new mount point in its check, so it gets a sandbox of its own with it read-only."""
    readable, writable = short_dir("ro"), short_dir("rw")
    for directory in (readable, writable):
        (directory / "late").mkdir()
    lates = [readable / "late", writable / "late"]
    paths = [(readable, True), (writable, False)]
    waiting = (
        f"touch {writable}/waiting; i=0; while [ ! -e {writable}/go ] && [ $i -lt 300 ]; "
        f"do sleep 0.1; i=$((i+1)); done; ls -A {lates[0]} {lates[1]}; "
        f"sh -c {shlex.quote(TRY_WRITE)} sh {lates[0]} {lates[1]}"
    )
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(_run, daemon, waiting, paths, "late-mount")
        _wait_for(writable / "waiting")
        with tmpfs_at(lates[0]), tmpfs_at(lates[1]):
            for late in lates:
                (late / "host-only").write_text("on the host's tmpfs\n")
            (writable / "go").touch()
            seen = running.result(timeout=60).splitlines()
            assert "host-only" not in seen, seen
            assert seen[-2:] == [f"refused {lates[0]}", f"wrote {lates[1]}"]
            assert not (lates[1] / "planted").exists(), "the write reached the late tmpfs"
            again = _try_writes(daemon, lates, paths, "late-mount")
            assert again == [f"refused {lates[0]}", f"wrote {lates[1]}"]
            assert (lates[1] / "planted").exists(), "a new sandbox has the tmpfs as the host does"
        assert (lates[1] / "planted").exists(), "the first write landed in the directory beneath"
    assert not (lates[0] / "planted").exists()


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_read_write_grant_keeps_its_mount_points_as_the_host_has_them(daemon: Daemon) -> None:
    project = short_dir("rw")
    with (
        tmpfs_at(project / "scratch") as scratch,
        tmpfs_at(project / "frozen", options="ro,size=1m") as frozen,
    ):
        seen = _try_writes(daemon, [scratch, frozen], [(project, False)], "rw-below")
        assert seen == [f"wrote {scratch}", f"refused {frozen}"]
        assert (scratch / "planted").exists()


def test_a_mount_point_that_cannot_be_bound_read_only_refuses_the_grant(daemon: Daemon) -> None:
    project = short_dir("ro")
    hidden = project / "a" / "b"
    with ExitStack() as mounts:
        mounts.enter_context(tmpfs_at(hidden))
        mounts.enter_context(tmpfs_at(project / "a"))
        response = run_with_paths(daemon, "true", [(project, True)])
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "submount_refused"
    assert f"the mount point {hidden} inside it cannot be mounted read-only" in error["message"]


def test_a_mount_point_whose_name_is_not_utf8_is_a_refusal_not_a_failure(
    daemon: Daemon,
) -> None:
    project = short_dir("ro")
    with tmpfs_at(Path(os.fsdecode(bytes(project) + b"/\xff"))):
        response = run_with_paths(daemon, "true", [(project, True)])
    assert response.status_code == 403, response.text
    assert response.json()["error"]["message"].startswith(
        f"refused {project}: the mount point {project}/\\xff inside it has a name that is not UTF-8"
    )


@pytest.mark.parametrize("image", ["python", "busybox"])
def test_the_identity_check_covers_each_mount_point_beneath(
    image: str, request: pytest.FixtureRequest
) -> None:
    """A mount point bound on its own is checked like a requested path (by the supervisor, or
    by `stat` in an image without python3): one that is not what the policy pinned destroys
    the sandbox before any command runs."""
    name = SANDBOX_IMAGE if image == "python" else request.getfixturevalue("busybox_image")
    project = short_dir("ro")
    (project / "other").mkdir()
    with tmpfs_at(project / "data") as data:
        checked = (
            Mount(str(project), True, identify(str(project))),
            Mount(str(data), True, identify(str(project / "other"))),
        )
        spec = SandboxSpec(name, checked, False, 1000, 1000, unix_sockets=image == "busybox")

        async def attempt() -> None:
            async with DockerBackend(image=SANDBOX_IMAGE, state_dir=short_dir("st")) as backend:
                with pytest.raises(MountChangedError) as changed:
                    await backend.run("below", spec, ExecRequest("echo ran"))
                assert f"{data} is not what was checked once mounted" in str(changed.value)
                assert await backend.list_sessions() == []

        anyio.run(attempt)


def test_a_mount_made_between_the_check_and_the_start_destroys_the_sandbox(
    docker_client: Any,
) -> None:
    """The engine binds what is there when the container starts: a mount point the policy did
    not list comes along writable, so the host's table is read again once the container
    runs, and the container is destroyed before any command."""
    project = short_dir("ro")
    with POLICY.grant_paths([(str(project), True)], caller_home=None) as grant:
        checked = tuple(Mount(g.path, g.read_only, g.identity) for g in grant.paths)
    spec = SandboxSpec(SANDBOX_IMAGE, checked, False, 1000, 1000)
    with tmpfs_at(project / "late") as late:

        async def attempt() -> None:
            async with DockerBackend(image=SANDBOX_IMAGE, state_dir=short_dir("st")) as backend:
                with pytest.raises(MountChangedError) as changed:
                    await backend.run("late", spec, ExecRequest(f"touch {late}/planted"))
                assert str(changed.value).startswith(
                    f"{late} was mounted on the host beneath the read-only {project} after it "
                    "was checked, so it would have been writable in the sandbox"
                )
                assert await backend.list_sessions() == []

        anyio.run(attempt)
        assert not (late / "planted").exists()
    left = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_SESSION}=late"}, ignore_removed=True
    )
    assert left == []
