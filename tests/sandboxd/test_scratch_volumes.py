"""A sandbox's /tmp and $HOME as tmpfs volumes (sandboxd.docker.scratch), against the real
Docker engine: what they are, that they go with their container whatever ends it, and that
the sweep finds those a gone daemon left."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.backend import ExecRequest, Limits, SandboxSpec
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import (
    LABEL_CREATED,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_OWNER_PROCESS,
    LABEL_SESSION,
    OwnerProcess,
)
from sandboxd.docker.scratch import LABEL_CONTAINER, LABEL_SCRATCH, volumes_in
from tests.support.parts import SANDBOX_IMAGE
from tests.support.sandboxd_harness import docker_backend, removing_test_containers, short_dir

UID = GID = 1000

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

remove_our_containers = removing_test_containers()


@pytest.fixture
async def backend() -> AsyncIterator[DockerBackend]:
    async with docker_backend(short_dir("sbv-"), sessions=8) as started:
        yield started


def spec(image: str = SANDBOX_IMAGE) -> SandboxSpec:
    return SandboxSpec(image, (), False, UID, GID, Limits(tmp=64 * 1024**2))


def volumes_of(docker_client: Any, session: str) -> list[str]:
    listed = docker_client.api.volumes(filters={"label": f"{LABEL_SESSION}={session}"})
    return sorted(volume["Name"] for volume in listed.get("Volumes") or [])


async def test_tmp_and_home_are_tmpfs_volumes_named_on_their_container(
    backend: DockerBackend, docker_client: Any
) -> None:
    outcome = await backend.run(
        "scratch",
        spec(),
        ExecRequest(
            "grep -E ' (/tmp|/home/sandbox) ' /proc/mounts | cut -d' ' -f2-4; "
            "stat -c '%n %a %u' /tmp $HOME; find /tmp $HOME -mindepth 1 | wc -l"
        ),
    )
    assert outcome.result.exit_code == 0, outcome.result
    lines = outcome.result.stdout.splitlines()
    assert lines[0].startswith("/tmp tmpfs rw,nosuid,nodev,") and "size=65536k" in lines[0]
    assert lines[1].startswith("/home/sandbox tmpfs rw,nosuid,nodev,"), lines
    assert "size=16384k" in lines[1] and f"uid={UID}" in lines[1] and "mode=700" in lines[1]
    assert lines[2:] == ["/tmp 1777 0", f"/home/sandbox 700 {UID}", "0"], lines
    container = docker_client.api.inspect_container(outcome.sandbox)
    named = volumes_in(container["Config"]["Labels"])
    assert sorted(named) == ["/home/sandbox", "/tmp"]
    assert sorted(named.values()) == volumes_of(docker_client, "scratch")
    mounted = {m["Destination"]: m["Name"] for m in container["Mounts"] if m["Type"] == "volume"}
    assert mounted == named
    for name in named.values():
        volume = docker_client.api.inspect_volume(name)
        assert name.startswith(f"{outcome.sandbox}.")
        assert volume["Labels"][LABEL_CONTAINER] == outcome.sandbox
        assert volume["Labels"][LABEL_OWNER] == backend.instance_id
        assert volume["Options"]["type"] == "tmpfs" and "nosuid,nodev" in volume["Options"]["o"]


async def test_the_volumes_go_with_their_container(docker_client: Any) -> None:
    async with docker_backend(short_dir("sbv-"), sessions=8) as backend:
        for session in ("closed", "kept"):
            ran = await backend.run(session, spec(), ExecRequest("echo x > /tmp/x"))
            assert ran.result.exit_code == 0, ran.result
        assert len(volumes_of(docker_client, "closed")) == 2
        assert await backend.close_session("closed")
        assert volumes_of(docker_client, "closed") == []
        # Its container removed behind the daemon's back: the daemon sees its supervisor
        # gone, and removes the volumes; the session's fresh sandbox has volumes of its own.
        (kept,) = backend._sessions.sandboxes_of("kept")
        docker_client.api.remove_container(kept.container_id, force=True)
        with anyio.fail_after(30):
            while backend._sessions.lost.get("kept") is None:
                await anyio.sleep(0.1)
        await backend.start("kept", spec(), fresh=True)
        (fresh,) = backend._sessions.sandboxes_of("kept")
        with anyio.fail_after(30):
            while volumes_of(docker_client, "kept") != sorted(v.name for v in fresh.volumes):
                await anyio.sleep(0.1)
    assert volumes_of(docker_client, "kept") == []  # and at its stop


async def test_a_start_that_fails_after_its_create_leaves_no_volume(
    backend: DockerBackend, docker_client: Any
) -> None:
    """An image with no shell: its container is created (and its volumes with it), then
    fails to start."""
    tag = "sandboxd-test-no-shell:latest"
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "marker").write_text("no shell here\n")
        (Path(context) / "Dockerfile").write_text("FROM scratch\nCOPY marker /marker\n")
        docker_client.images.build(path=context, tag=tag, rm=True)
    outcome = await backend.run("no-shell", spec(tag), ExecRequest("true"))
    assert outcome.result.error is not None and "could not start" in outcome.result.error
    assert volumes_of(docker_client, "no-shell") == []


async def test_the_sweep_takes_the_volumes_of_a_gone_daemon_and_spares_a_live_ones(
    backend: DockerBackend, docker_client: Any
) -> None:
    me = OwnerProcess.current()
    gone = OwnerProcess(me.boot_id, me.pid_namespace, me.pid, me.start_ticks + 1)
    made = []
    for owner, instance in ((gone, "gone-daemon"), (me, "live-daemon")):
        name = f"sandboxd-sweep-test-{instance}.tmp.0123456789abcdef"
        docker_client.api.create_volume(
            name,
            driver="local",
            driver_opts={"type": "tmpfs", "device": "tmpfs", "o": "size=1m"},
            labels={
                LABEL_MANAGED: "1",
                LABEL_SESSION: "sweep-test",
                LABEL_CREATED: "0",
                LABEL_OWNER: instance,
                LABEL_OWNER_PROCESS: owner.label,
                LABEL_CONTAINER: f"sandboxd-sweep-test-{instance}",
            },
        )
        made.append(name)
    try:
        await backend.gc()
        assert volumes_of(docker_client, "sweep-test") == [made[1]]
    finally:
        docker_client.api.remove_volume(made[1], force=True)


def test_a_container_names_its_volumes_by_place() -> None:
    labels = {LABEL_SCRATCH: '{"/tmp":"c.tmp.00","/home/sandbox":"c.home.01"}'}
    assert volumes_in(labels) == {"/tmp": "c.tmp.00", "/home/sandbox": "c.home.01"}
    for garbage in ("", "not json", "[1]", '{"/tmp": "-bad"}', '{"/tmp": 3}'):
        assert volumes_in({LABEL_SCRATCH: garbage}) == {}
    assert volumes_in({}) == {}
