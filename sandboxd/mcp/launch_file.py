"""`sandboxd mcp --config FILE`: the launch's limits written down, for an editor's config to
point at one file instead of spelling every flag. Its keys are the launch's options
(`logos.options.declarations`, `Place.SANDBOXD_LAUNCH`); flags add to the file's lists and
override its values."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from logos.options.declarations import options_at
from logos.options.option import Place, Values, file_model

LAUNCH_OPTIONS = options_at(Place.SANDBOXD_LAUNCH)
_LaunchKeys = file_model("McpLaunchFile", LAUNCH_OPTIONS)


class LaunchFileError(ValueError):
    """The launch file cannot be used; the message names the file and what is wrong."""


def load_launch_file(path: Path) -> Values:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LaunchFileError(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LaunchFileError(f"{path} is not TOML: {exc}") from None
    try:
        keys = _LaunchKeys.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'file'}: {error['msg']}"
            for error in exc.errors()
        )
        raise LaunchFileError(
            f"{path}: {problems} (keys: {', '.join(sorted(_LaunchKeys.model_fields))})"
        ) from None
    return Values.of(keys, LAUNCH_OPTIONS)
