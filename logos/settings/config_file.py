"""The config file: TOML (`~/.config/logos/config.toml`, under `$XDG_CONFIG_HOME` when set,
or `--config FILE`) holding a default for each option whose declaration puts it there
(`logos.options.declarations`), and the `[serve]` table.

Every key is optional, and an unknown key is an error naming the key and the file: a
misspelt setting must never be silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import AfterValidator, ValidationError

from logos.approvals.rules import read_toml
from logos.errors import SettingsError, describe_invalid
from logos.options.declarations import GRAMMAR, NO_GRAMMAR, PROMPT_STYLE, PROVIDER, options_at
from logos.options.option import Place, Values, file_model
from logos.protocol.grammar import GRAMMARS
from logos.protocol.prompt import PROMPT_STYLES
from logos.providers.registry import PROVIDER_KINDS
from logos.settings.serve_table import ServeSettings

CHOICES: Mapping[str, Sequence[str]] = {
    PROVIDER.key: tuple(PROVIDER_KINDS),
    PROMPT_STYLE.key: PROMPT_STYLES,
    GRAMMAR.key: (*GRAMMARS, NO_GRAMMAR),
}
"""The options whose values are names a registry above the declarations knows: checked as
the file is read, offered as a flag's choices."""


def _one_of(key: str) -> Callable[[str], str]:
    def check(name: str) -> str:
        if name not in CHOICES[key]:
            noun = key.replace("_", " ")
            raise ValueError(f"unknown {noun} {name!r}: choose one of {', '.join(CHOICES[key])}")
        return name

    return check


ConfigFileKeys = file_model(
    "ConfigFile",
    options_at(Place.CONFIG_FILE),
    checks={key: AfterValidator(_one_of(key)) for key in CHOICES},
    tables={"serve": ServeSettings},
)
"""The config file's keys as a model, derived from the declarations (the docs' reference
table is written from it)."""


class ConfigFile(Values):
    """The config file's values (by option), its `[serve]` table, and where it was read."""

    def __init__(
        self,
        given: Mapping[str, object] | None = None,
        *,
        serve: ServeSettings | None = None,
        path: Path | None = None,
    ) -> None:
        super().__init__(given)
        self.serve = serve or ServeSettings()
        self.path = path
        """None: there is no config file (the defaults)."""


def default_config_path(environ: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/logos/config.toml`, else `~/.config/logos/config.toml`."""
    config_home = environ.get("XDG_CONFIG_HOME")
    base = Path(config_home) if config_home else Path.home() / ".config"
    return base / "logos" / "config.toml"


def load_config_file(explicit: Path | None, environ: Mapping[str, str]) -> ConfigFile:
    """The settings of `explicit` (which must exist), else of the default file if present;
    SettingsError names the file and each key that is wrong."""
    path = explicit if explicit is not None else default_config_path(environ)
    if explicit is None and not path.exists():
        return ConfigFile()
    data = read_toml(path, "config file", "check the --config path", SettingsError)
    try:
        keys = ConfigFileKeys.model_validate(data)
    except ValidationError as exc:
        problems = describe_invalid(exc, "key", lambda _: ConfigFileKeys.model_fields)
        raise SettingsError(f"config file {path}: {problems}") from None
    given = {option.key: getattr(keys, option.key) for option in options_at(Place.CONFIG_FILE)}
    serve: ServeSettings = keys.serve  # type: ignore[attr-defined]  # the [serve] table
    return ConfigFile(given, serve=serve, path=path)
