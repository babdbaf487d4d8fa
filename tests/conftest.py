"""Shared fixtures. Real parts only: a real Docker engine, real bash, real HTTP servers.

Tests mirror the packages (tests/logos, tests/sandboxd), attacks live in tests/security, and
the helpers every folder shares in tests/support."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.parts import BUSYBOX_IMAGE, SANDBOX_IMAGE, require
from tests.support.sandboxd_harness import Daemon, running_daemon

pytest_plugins = ["tests.support.sse_server", "tests.support.llama"]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker-py client for a running engine that has the sandbox image."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure means: no usable engine
        require(False, f"no Docker engine ({exc}); run ./scripts/setup-docker")
        raise
    try:
        client.images.get(SANDBOX_IMAGE)
    except Exception:
        require(False, f"image {SANDBOX_IMAGE} missing; run ./scripts/setup-docker")
    yield client
    client.close()


@pytest.fixture(scope="session")
def busybox_image(docker_client: Any) -> str:
    """A python-less image built offline from the host's static busybox (idempotent): it makes
    the daemon fall back to `docker exec`."""
    try:
        docker_client.images.get(BUSYBOX_IMAGE)
        return BUSYBOX_IMAGE
    except Exception:
        pass
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.fail(
            "busybox is needed to build the fallback test image: run ./scripts/setup-docker "
            "(or apt-get install busybox-static)"
        )
    with tempfile.TemporaryDirectory() as context:
        shutil.copy(busybox, Path(context) / "busybox")
        (Path(context) / "Dockerfile").write_text(
            "FROM scratch\n"
            "COPY busybox /bin/busybox\n"
            'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
        )
        docker_client.images.build(path=context, tag=BUSYBOX_IMAGE, rm=True)
    return BUSYBOX_IMAGE


@pytest.fixture(scope="session")
def dash_exec_image(docker_client: Any) -> str:
    """The sandbox image without python3: the daemon falls back to `docker exec`, with dash as
    /bin/sh and coreutils' `setsid` and `sleep` found through PATH (busybox's shell runs its
    own applets whatever PATH says). Built offline on top of the sandbox image; cached."""
    tag = "sandboxd-test-dash:latest"
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "Dockerfile").write_text(
            f"FROM {SANDBOX_IMAGE}\nUSER root\nRUN rm /usr/bin/python3\nUSER sandbox\n"
        )
        docker_client.images.build(path=context, tag=tag, rm=True)
    return tag


@pytest.fixture(scope="module")
def daemon(docker_client: Any) -> Iterator[Daemon]:
    """A real sandboxd with the default config, shared by a module's tests."""
    with running_daemon(docker_client) as serving:
        yield serving


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, the loop the CLI and the daemons use."""
    return "asyncio"
