"""Attack: reach a refused place through a bind mount the host made inside an allowed path.

The policy's rules look at names, and a bind mount shows one place under another: the
engine's socket bound into a project is the engine socket, whatever its name there, and the
engine brings it along into the sandbox with the project. The daemon reads its mount table
and refuses a path at or beneath which such a place is mounted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.host_mounts import bound_at
from tests.support.sandboxd_harness import Daemon, run_with_paths, short_dir

pytestmark = pytest.mark.docker

ENGINE_SOCKET = Path("/var/run/docker.sock")


@pytest.mark.parametrize("read_only", [True, False])
def test_the_engine_socket_bound_into_a_project_is_refused(daemon: Daemon, read_only: bool) -> None:
    project = short_dir("bound")
    with bound_at(project / "engine.sock", ENGINE_SOCKET) as bound:
        response = run_with_paths(daemon, f"test -S {bound}", [(project, read_only)])
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "path_refused"
    shown = f"refused {project}: the mount point {bound} inside it shows {ENGINE_SOCKET.resolve()}"
    assert error["message"].startswith(f"{shown}: the container engine socket ")
    assert error["message"].endswith("docker.sock is never mountable")
