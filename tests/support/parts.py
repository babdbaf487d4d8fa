"""What every test may need from the real world: skip or fail when a real part is missing."""

from __future__ import annotations

import os

import pytest

SANDBOX_IMAGE = os.environ.get("SANDBOXD_IMAGE", "logos-sandbox:latest")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
BUSYBOX_IMAGE = "sandboxd-test-busybox:latest"


def require(condition: bool, reason: str) -> None:
    """Skip locally when a real part is missing; in CI a missing part is a failure."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing engine or model is a failure, not a skip)")
    pytest.skip(reason)
