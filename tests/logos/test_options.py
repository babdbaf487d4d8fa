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


@pytest.mark.parametrize("after", [0, -1.0, float("inf"), float("nan")])
def test_background_after_must_be_a_positive_number_of_seconds(after: float) -> None:
    with pytest.raises(ValueError, match="background_after_s must be a finite number"):
        ExecOptions(background_after_s=after)


def test_a_command_goes_on_as_a_job_only_before_its_timeout() -> None:
    assert ExecOptions().background_at_s() is None
    assert ExecOptions(timeout_s=60, background_after_s=30).background_at_s() == 30
    assert ExecOptions(timeout_s=10, background_after_s=30).background_at_s() is None
