"""The one backend factory: it builds what the config names, with the config's settings."""

from __future__ import annotations

import pytest

from sandboxd.docker.backend import DockerBackend
from sandboxd.server.backends import build_backend
from sandboxd.server.config import config_from_mapping
from tests.support.sandboxd_harness import short_dir

pytestmark = pytest.mark.anyio


async def test_the_docker_backend_is_built_with_the_configs_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state_dir = short_dir()
    # An engine that is not there: health() then reports it, and the caps come from the config.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{state_dir}/no-engine.sock")
    config = config_from_mapping(
        {
            "backend": "docker",
            "image": "sandboxd-test:configured",
            "state_dir": str(state_dir),
            "max_sessions": 3,
            "max_sessions_per_caller": 2,
        },
        source="test",
    )
    backend = build_backend(config)
    assert isinstance(backend, DockerBackend)
    report = await backend.health()
    assert report.image == "sandboxd-test:configured"
    assert (report.max_sessions, report.max_sessions_per_caller) == (3, 2)
    assert not report.ok and "no-engine.sock" in report.problems[0]
