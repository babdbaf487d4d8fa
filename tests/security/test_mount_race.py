"""Attack: swap a checked path with a symlink between the policy's check and the engine's mount.

The daemon resolves and checks a requested path; the engine resolves the same name again when it
creates the bind mount. A swapper that exchanges a real directory (or file) and a symlink with
`renameat2(RENAME_EXCHANGE)` in a tight loop wins that race unless what the container mounts is
verified to be what was checked. Each request here starts a new session (a new container and so a
new mount); a request that lands on the swapped-in target is an escape.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from sandboxd.backend import ExecRequest, Mount, MountChangedError, SandboxSpec
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import LABEL_SESSION
from sandboxd.policy.pinned import identify
from tests.support.parts import SANDBOX_IMAGE
from tests.support.path_swaps import SWAPPER, swapping
from tests.support.sandboxd_harness import Daemon, running_daemon, short_dir

pytestmark = pytest.mark.docker

TRIES = 50
ENGINE_SOCKET = Path("/var/run/docker.sock")


def _new_sessions(
    daemon: Daemon, command: str, path: Path, tries: int, *, also: Path | None = None
) -> list[httpx.Response]:
    """`tries` requests, each the first of its own session, four at a time; `also` is mounted
    first (it is then the working directory)."""
    mounts = [{"path": str(p), "read_only": True} for p in (also, path) if p is not None]

    def one(index: int) -> httpx.Response:
        with daemon.client() as client:
            return client.post(
                "/v1/run",
                json={
                    "command": command,
                    "allowed_paths": mounts,
                    "session": f"race-{index}",
                    "timeout_s": 30,
                },
            )

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(tries)))


def _tally(responses: list[httpx.Response], escaped: str) -> dict[str, int]:
    """How the requests ended: ran on the real thing, escaped, or refused (by code)."""
    tally = {"ran": 0, "escaped": 0}
    for response in responses:
        if response.status_code == 200:
            body = response.json()
            if escaped in body["stdout"]:
                tally["escaped"] += 1
            else:
                assert body["error"] is None and body["exit_code"] == 0, body
                tally["ran"] += 1
        else:
            assert response.status_code in (403, 409), response.text
            code = response.json()["error"]["code"]
            tally[code] = tally.get(code, 0) + 1
    return tally


@pytest.mark.timeout(600)
def test_a_directory_swapped_with_a_symlink_to_a_refused_one_is_never_mounted(
    docker_client: Any,
) -> None:
    root = short_dir("race")
    secret = root / "secret"
    secret.mkdir()
    (secret / "which").write_text("SECRET\n")
    real = root / "project" / "real"
    real.mkdir(parents=True)
    (real / "which").write_text("real\n")
    decoy = root / "project" / "decoy"
    decoy.symlink_to(secret)
    with running_daemon(docker_client, f'extra_denies = ["{secret}"]\n') as daemon:
        with swapping(real, decoy):
            responses = _new_sessions(daemon, f"cat {real}/which", real, TRIES)
        tally = _tally(responses, "SECRET")
        print(f"\n[mount race, directory] {TRIES} new sessions: {tally}")
        assert tally["escaped"] == 0, tally
        assert tally["ran"] > 0, f"the real directory was never mounted: nothing tested {tally}"
        _audit_names_what_was_mounted(daemon, real)


@pytest.mark.timeout(600)
def test_a_file_swapped_with_a_symlink_to_the_engine_socket_is_never_mounted(
    docker_client: Any,
) -> None:
    if not ENGINE_SOCKET.exists():
        pytest.skip("the engine's socket is elsewhere on this machine")
    root = short_dir("race")
    project = root / "project"
    project.mkdir()
    real = project / "notes.txt"
    real.write_text("real\n")
    decoy = project / "decoy"
    decoy.symlink_to(ENGINE_SOCKET)
    command = f"if [ -S {real} ]; then echo ENGINE-SOCKET; else cat {real}; fi"
    workdir = root / "work"
    workdir.mkdir()
    with running_daemon(docker_client) as daemon:
        with swapping(real, decoy):
            responses = _new_sessions(daemon, command, real, TRIES, also=workdir)
        tally = _tally(responses, "ENGINE-SOCKET")
        print(f"\n[mount race, file] {TRIES} new sessions: {tally}")
        assert tally["escaped"] == 0, tally
        assert tally["ran"] > 0, f"the real file was never mounted: nothing tested {tally}"


@pytest.mark.timeout(600)
def test_a_swap_made_from_inside_another_sandbox_is_never_mounted(docker_client: Any) -> None:
    """The attacker is a sandboxed command with the parent directory read-write."""
    root = short_dir("race")
    secret = root / "secret"
    secret.mkdir()
    (secret / "which").write_text("SECRET\n")
    project = root / "project"
    (project / "real").mkdir(parents=True)
    (project / "real" / "which").write_text("real\n")
    (project / "decoy").symlink_to(secret)
    real = project / "real"
    with running_daemon(docker_client, f'extra_denies = ["{secret}"]\n') as daemon:
        with daemon.client() as attacker:
            started = attacker.post(
                "/v1/run",
                json={
                    "command": f"nohup python3 -c '{SWAPPER}' {real} {project / 'decoy'} "
                    ">/dev/null 2>&1 & sleep 0.5; echo started",
                    "allowed_paths": [{"path": str(project), "read_only": False}],
                    "session": "attacker",
                },
            )
            assert started.status_code == 200 and "started" in started.json()["stdout"]
            try:
                responses = _new_sessions(daemon, f"cat {real}/which", real, TRIES)
            finally:
                attacker.delete("/v1/sessions/attacker")
        tally = _tally(responses, "SECRET")
        print(f"\n[mount race, from a sandbox] {TRIES} new sessions: {tally}")
        assert tally["escaped"] == 0, tally


def _audit_names_what_was_mounted(daemon: Daemon, requested: Path) -> None:
    """Each audited mount carries the identity of what the container saw."""
    import json

    lines = [json.loads(line) for line in daemon.audit_log.read_text().splitlines()]
    mounted = [
        mount
        for line in lines
        if line["status"] == 200 and line.get("mounts")
        for mount in line["mounts"]
    ]
    assert mounted, "no successful request was audited"
    real = os.stat(requested)
    for mount in mounted:
        assert mount["path"] == str(requested)
        assert (mount["device"], mount["inode"]) == (real.st_dev, real.st_ino), mount


@pytest.mark.parametrize("image", ["python", "busybox"])
def test_a_mount_that_is_not_what_was_checked_destroys_the_container(
    docker_client: Any, image: str, request: pytest.FixtureRequest
) -> None:
    """The check itself, without a race: the backend is told another identity than the one the
    engine will mount (as if a swap had happened in between)."""
    name = SANDBOX_IMAGE if image == "python" else request.getfixturevalue("busybox_image")
    root = short_dir("race")
    (root / "checked").mkdir()
    (root / "mounted").mkdir()
    lie = Mount(str(root / "mounted"), True, identify(str(root / "checked")))
    spec = SandboxSpec(name, (lie,), False, 1000, 1000, unix_sockets=image == "busybox")
    # WHY a session of its own: the other image's case may run at the same time, in another
    # worker, and its container is not this one's to count.
    session = f"swapped-{image}"

    async def attempt() -> None:
        async with DockerBackend(image=SANDBOX_IMAGE, state_dir=short_dir("st")) as backend:
            with pytest.raises(MountChangedError, match="not what was checked"):
                await backend.run(session, spec, ExecRequest("echo ran"))
            assert await backend.list_sessions() == []

    anyio.run(attempt)
    left = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_SESSION}={session}"}, ignore_removed=True
    )
    assert left == []
