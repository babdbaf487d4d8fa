"""`sandboxd mcp --config FILE`: the launch's limits written down, for an editor's config to
point at one file instead of spelling every flag. Flags add to the file's lists and override
its values."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class LaunchFileError(ValueError):
    """The launch file cannot be used; the message names the file and what is wrong."""


class McpLaunchFile(BaseModel):
    """The keys of the file: the `sandboxd mcp` flags of the same names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: list[str] = Field(default_factory=list)
    """PATH[:ro|:rw], as --allow."""
    allow_host: list[str] = Field(default_factory=list)
    network: bool = False
    image: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = None
    max_timeout: float | None = None
    background_after: float | None = None
    max_forks: int | None = None


def load_launch_file(path: Path) -> McpLaunchFile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LaunchFileError(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LaunchFileError(f"{path} is not TOML: {exc}") from None
    try:
        return McpLaunchFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'file'}: {error['msg']}"
            for error in exc.errors()
        )
        raise LaunchFileError(
            f"{path}: {problems} (keys: {', '.join(McpLaunchFile.model_fields)})"
        ) from None
