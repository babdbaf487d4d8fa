"""The one backend factory: it builds what the config names, with the config's settings."""

from __future__ import annotations

import pytest

from sandboxd.backends import build_backend
from sandboxd.config import config_from_mapping
from sandboxd.docker.backend import DockerBackend
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


def test_a_state_dir_the_backend_cannot_use_is_a_value_error() -> None:
    config = config_from_mapping({"state_dir": "/tmp/" + "d" * 100}, source="test")
    with pytest.raises(ValueError, match="shorter state_dir"):
        build_backend(config)
