"""Shared fixtures. Real parts only: a real Docker engine, real bash, real HTTP servers.

Tests mirror the packages (tests/logos, tests/sandboxd), attacks live in tests/security, and
the helpers every folder shares in tests/support."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# WHY here, before any test module imports huggingface_hub: it reads its variables once, at
# import. No test may reach the real Hub or read the user's Hugging Face cache and token:
# tests point HF_ENDPOINT at tests/support/hub_server.py (the discard port refuses whatever
# is not pointed there, such as huggingface_hub's own background requests) and HF_HOME at a
# temporary directory.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="logos-tests-hf-home-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
for _variable in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
    os.environ.pop(_variable, None)

from tests.support.parts import BUSYBOX_IMAGE, SANDBOX_IMAGE, require  # noqa: E402
from tests.support.processes import processes_matching  # noqa: E402
from tests.support.sandboxd_harness import Daemon, running_daemon  # noqa: E402
from tests.support.timeouts import stretch_timeouts  # noqa: E402
from tests.support.worker_groups import assign_groups  # noqa: E402

pytest_plugins = [
    "tests.support.sse_server",
    "tests.support.cli_harness",
    "tests.support.batch_model",
    "tests.support.hub_server",
    "tests.support.llama",
    "tests.support.browser",
    "tests.support.real_parts",
    "pytester",
]


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C is given back to the tests' programs. WHY: a suite started in the background by
    a script (`./scripts/test &`, a CI step) inherits SIGINT ignored, and so would every
    program a test starts: the tests that stop one with Ctrl-C would fail, or prove nothing."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test marked with the real parts it uses, then given its xdist group by rule and
    its timeout for its share of a CPU: first, so that `-m` selects on those marks and xdist
    reads those groups."""
    # WHY here: a module named in pytest_plugins must be imported by pytest first (it
    # rewrites its asserts), after this file has run.
    from tests.support.real_parts import mark_real_parts

    mark_real_parts(items)
    assign_groups(items)
    stretch_timeouts(config, items)


LONG_BYTES = 64


def pytest_make_parametrize_id(val: object, argname: str) -> str | None:
    """A long bytes value is named by its length, not spelt out. WHY: such values are real
    TLS hellos, random in each process; pytest-xdist needs every worker to collect tests of
    the same names (and 2 KB of escaped bytes in a test's name helps no one)."""
    if isinstance(val, bytes) and len(val) > LONG_BYTES:
        return f"{argname}-{len(val)}-bytes"
    return None


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
def marker() -> Iterator[str]:
    """A `sleep` argument no other process has; whatever still carries it is killed after."""
    marker = f"1000.{uuid.uuid4().int % 10**12:012d}"
    yield marker
    for pid in processes_matching(f"sleep {marker}"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, the loop the CLI and the daemons use."""
    return "asyncio"
