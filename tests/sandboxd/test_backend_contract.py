"""The backend contract without an engine: validation, lazy imports, an unreachable engine."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import logos.runners.capture
from sandboxd.backend import (
    EngineUnavailableError,
    ExecRequest,
    Limits,
    Mount,
    SandboxSpec,
)
from sandboxd.docker.backend import DockerBackend
from sandboxd.docker.ownership import (
    LABEL_CREATED,
    LABEL_OWNER_PROCESS,
    STARTING_GRACE_S,
    OwnerProcess,
    is_orphan,
)
from sandboxd.inside import copier, supervisor
from sandboxd.policy.pinned import FileIdentity

IMAGE = "logos-sandbox:latest"
SOME_DIRECTORY = FileIdentity(device=1, inode=2, kind="directory")


@pytest.fixture
def state_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sbx-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_importing_the_contract_does_not_import_docker() -> None:
    code = "import sys, sandboxd.backend; print('docker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_contract_types_validate_their_inputs() -> None:
    with pytest.raises(ValueError, match="absolute"):
        Mount("relative/path", True, SOME_DIRECTORY)
    with pytest.raises(ValueError, match="timeout_s"):
        ExecRequest("true", timeout_s=0)
    with pytest.raises(ValueError, match="memory"):
        Limits(memory=1024)
    with pytest.raises(ValueError, match="mounted once"):
        SandboxSpec(
            IMAGE,
            (Mount("/a", True, SOME_DIRECTORY), Mount("/a", False, SOME_DIRECTORY)),
            False,
            1,
            1,
        )


def test_a_long_state_dir_is_fine_now_that_sandboxes_need_no_socket() -> None:
    """The control directories hold FIFOs, whose paths have no 108-byte limit."""
    DockerBackend(image=IMAGE, state_dir=Path("/tmp/" + "d" * 200))


@pytest.mark.anyio
async def test_unreachable_engine_is_reported_and_raised(state_dir: Path) -> None:
    url = f"unix://{state_dir}/no-docker.sock"
    async with DockerBackend(image=IMAGE, state_dir=state_dir, docker_base_url=url) as backend:
        report = await backend.health()
        assert not report.ok and report.engine_version is None and not report.image_present
        assert report.problems[0].startswith(f"Docker engine unreachable at {url}: start it")
        spec = SandboxSpec(IMAGE, (), False, 1000, 1000)
        with pytest.raises(EngineUnavailableError, match="start it"):
            await backend.run("s", spec, ExecRequest("true"))


@pytest.mark.anyio
async def test_mounts_over_reserved_paths_are_result_errors(state_dir: Path) -> None:
    url = f"unix://{state_dir}/no-docker.sock"
    async with DockerBackend(image=IMAGE, state_dir=state_dir, docker_base_url=url) as backend:
        for path in ("/", "/.sandboxd", "/.sandboxd/inner"):
            spec = SandboxSpec(IMAGE, (Mount(path, True, SOME_DIRECTORY),), False, 1000, 1000)
            outcome = await backend.run("s", spec, ExecRequest("true"))
            assert outcome.result.error is not None and "reserves" in outcome.result.error


def test_orphan_rule_checks_the_owner_process_when_it_can() -> None:
    me = OwnerProcess.current()
    alive = {LABEL_OWNER_PROCESS: me.label}
    assert not is_orphan(alive, "running", me)
    assert not is_orphan(alive, "exited", me)  # a live owner's stopped container is its own
    gone = OwnerProcess(me.boot_id, me.pid_namespace, me.pid, me.start_ticks + 1)
    assert is_orphan({LABEL_OWNER_PROCESS: gone.label}, "running", me)


def test_orphan_rule_spares_running_containers_of_unverifiable_owners() -> None:
    me = OwnerProcess.current()
    elsewhere = OwnerProcess("another-boot", me.pid_namespace, 1, 1).label
    now = time.time()
    assert not is_orphan({LABEL_OWNER_PROCESS: elsewhere}, "running", me)
    assert is_orphan({LABEL_OWNER_PROCESS: elsewhere}, "exited", me)
    recent = {LABEL_OWNER_PROCESS: elsewhere, LABEL_CREATED: str(int(now))}
    assert not is_orphan(recent, "created", me, now=now)
    assert is_orphan(recent, "created", me, now=now + STARTING_GRACE_S + 1)
    assert not is_orphan({}, "running", me)
    assert is_orphan({LABEL_OWNER_PROCESS: "garbage"}, "dead", me)


def test_supervisor_parses_with_python_38_grammar() -> None:
    """It runs on the sandbox image's python3, which may be older than the project's; so does
    a fork's copier."""
    for module in (supervisor, logos.runners.capture, copier):
        ast.parse(Path(module.__file__ or "").read_text(), feature_version=(3, 8))
