"""Building the sandbox image from the project's Dockerfile with the real engine."""

from __future__ import annotations

from typing import Any

import pytest

from sandboxd.docker.image import ImageBuildError, build_image, dockerfile_path
from tests.support.parts import require

pytestmark = pytest.mark.docker

TEST_TAG = "sandboxd-test-build:latest"
# A registry's Debian when one was reachable, else the base scripts/setup-docker builds offline.
LOCAL_BASES = ("debian:bookworm-slim", "logos-sandbox-base:bookworm")


@pytest.mark.timeout(600)
def test_builds_the_sandbox_image_from_a_local_base(docker_client: Any) -> None:
    present = [base for base in LOCAL_BASES if docker_client.images.list(name=base)]
    require(bool(present), f"none of the base images {LOCAL_BASES} is present")
    lines: list[str] = []
    try:
        image_id = build_image(tag=TEST_TAG, base=present[0], on_output=lines.append)
        assert image_id.startswith("sha256:")
        assert docker_client.images.get(TEST_TAG).id == image_id
        assert any("Successfully built" in line for line in lines)
    finally:
        docker_client.images.remove(TEST_TAG, noprune=True)


@pytest.mark.timeout(300)
def test_a_missing_base_fails_with_the_builders_reason(docker_client: Any) -> None:
    with pytest.raises(ImageBuildError, match=r"building .* failed: .*--base IMAGE"):
        build_image(tag=TEST_TAG, base="sandboxd-test-missing-base:never")
    assert not docker_client.images.list(name=TEST_TAG)


def test_the_dockerfile_is_found() -> None:
    assert "ARG BASE=" in dockerfile_path().read_text()
