"""ExecOptions refuses values that would break the runner's promises, and says why."""

from __future__ import annotations

import pytest

from logos import AllowedPath, ExecOptions


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), float("inf")])
def test_a_timeout_is_always_a_finite_positive_number(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s must be"):
        ExecOptions(timeout_s=timeout_s)


@pytest.mark.parametrize(
    "env",
    [{"": "x"}, {"A=B": "x"}, {"A\0": "x"}, {"A": "x\0y"}],
    ids=["empty-name", "equals-in-name", "nul-in-name", "nul-in-value"],
)
def test_env_names_and_values_a_process_cannot_hold_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="env"):
        ExecOptions(env=env)


def test_defaults_are_the_safe_ones() -> None:
    options = ExecOptions()
    assert options.timeout_s == 120 and options.max_output_bytes == 32 * 1024
    assert options.inherit_env and options.resolved_workdir() is None
    assert AllowedPath("/srv").read_only
    assert ExecOptions(env={"PATH_EXTRA": "a=b"}).env == {"PATH_EXTRA": "a=b"}
