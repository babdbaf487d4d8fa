"""Which model a run talks to, as the settings say: a provider (its kind, base URL and key,
from the flags, a resumed run's record, the config file and the environment), or a model
run in this process (a GGUF file, a Hub model, or the default one for this machine)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from logos.errors import SettingsError
from logos.models.fitting import UnknownLocalModel, default_for_this_machine
from logos.models.hub_file import HubFile
from logos.options.declarations import (
    API_KEY_ENV,
    BASE_URL,
    CONTEXT_SIZE,
    DEFAULT_CONTEXT_SIZE,
    GGUF,
    LOCAL_MODEL,
    MODEL,
    PROVIDER,
    THREADS,
)
from logos.options.option import Values
from logos.providers.choice import ProviderChoice, resolve_model_sync
from logos.providers.http_provider import normalize_base_url
from logos.providers.registry import (
    LOCAL_SERVER_KIND,
    PROVIDER_KINDS,
    ProviderKind,
    provider_kind,
)
from logos.records.trajectory import Trajectory

_HUB_SCHEME = "hf:"
_NO_PROVIDER_MESSAGE = (
    "no model provider is configured: set "
    + " or ".join(f"{kind.api_key_env} ({kind.label})" for kind in PROVIDER_KINDS.values())
    + f"; or point --base-url (or {LOCAL_SERVER_KIND.base_url_env}) at an "
    f"{LOCAL_SERVER_KIND.label}-compatible server such as llama.cpp, Ollama or vLLM, e.g. "
    "--base-url http://127.0.0.1:8080/v1; or run a local GGUF model offline with --gguf PATH"
)


@dataclass(frozen=True)
class ProviderFlags:
    """What the user asked for on the command line (or a resumed run recorded)."""

    provider: str | None = None
    """A name in the provider registry."""
    model: str | None = None
    base_url: str | None = None


def choose_provider(
    flags: ProviderFlags,
    config: Values,
    environ: Mapping[str, str],
    recorded: ProviderFlags | None = None,
) -> ProviderChoice:
    """Resolve the provider, base URL and API key; SettingsError says what to set.

    `recorded` is what a resumed run used: it comes right after the flags, unless the flags
    switch to another provider kind (then the recorded model would not fit).
    """
    if recorded is not None and flags.provider in (None, recorded.provider):
        assert recorded.provider is not None  # a run header always names its provider
        kind = _known_kind(recorded.provider)
        model = flags.model or recorded.model
        base_url, source = _first_set(
            (flags.base_url, "--base-url"), (recorded.base_url, "the resumed run")
        )
    else:
        name = flags.provider or config[PROVIDER]
        kind = _detect_kind(flags, config, environ) if name is None else _known_kind(name)
        model = flags.model or config[MODEL]
        base_url, source = _first_set(
            (flags.base_url, "--base-url"),
            (config[BASE_URL], "base_url in the config file"),
            (environ.get(kind.base_url_env), kind.base_url_env),
        )
    key_env = config[API_KEY_ENV] or kind.api_key_env
    choice = ProviderChoice(
        kind=kind,
        model=model,
        base_url=_checked_base_url(base_url or kind.default_base_url, source),
        api_key=environ.get(key_env) or None,
        api_key_env=key_env,
    )
    if choice.api_key is None and choice.uses_default_server:
        raise SettingsError(
            f"{key_env} is not set: export {key_env}=<your {kind.label} API key>, or point "
            "--base-url at a server that needs no key"
        )
    return choice


def _known_kind(name: str) -> ProviderKind:
    try:
        return provider_kind(name)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _first_set(*candidates: tuple[str | None, str]) -> tuple[str | None, str]:
    """The first value that is set, and where it came from."""
    return next(((value, source) for value, source in candidates if value), (None, "default"))


def _checked_base_url(url: str, source: str) -> str:
    try:
        return normalize_base_url(url)
    except ValueError as exc:
        raise SettingsError(f"{exc} (set by {source})") from None


def _detect_kind(flags: ProviderFlags, config: Values, environ: Mapping[str, str]) -> ProviderKind:
    if flags.base_url or config[BASE_URL]:
        return LOCAL_SERVER_KIND
    for kind in PROVIDER_KINDS.values():
        if environ.get(kind.api_key_env) or environ.get(kind.base_url_env):
            return kind
    raise SettingsError(_NO_PROVIDER_MESSAGE)


@dataclass(frozen=True)
class GgufSpec:
    path: Path
    context_size: int = DEFAULT_CONTEXT_SIZE
    threads: int | None = None


@dataclass(frozen=True)
class HubModelSpec:
    """A GGUF model on the Hugging Face Hub, fetched into the cache, then run like --gguf."""

    file: HubFile
    context_size: int = DEFAULT_CONTEXT_SIZE
    threads: int | None = None
    default: bool = False
    """Chosen because nothing else was: no key, no base URL, no --gguf, no hf: model."""
    why: str = ""
    """For the default: why this model of `logos.models.fitting.LOCAL_MODELS`."""

    def at(self, path: Path) -> GgufSpec:
        return GgufSpec(path, self.context_size, self.threads)


LocalModel = GgufSpec | HubModelSpec


def choose_provider_for(
    flags: Values,
    config: Values,
    environ: Mapping[str, str],
    recorded: Trajectory | None,
) -> ProviderChoice:
    """`choose_provider` for these flags and, when resuming, the recorded run."""
    earlier = None
    if recorded is not None and recorded.header.gguf is None:
        header = recorded.header
        earlier = ProviderFlags(header.provider, header.model, header.base_url)
    asked = ProviderFlags(flags[PROVIDER], flags[MODEL], flags[BASE_URL])
    return choose_provider(asked, config, environ, earlier)


def gguf_spec(flags: Values, recorded: Trajectory | None) -> GgufSpec | None:
    """The local GGUF model to serve, if the flags or the resumed run name one."""
    path = flags[GGUF]
    provider_asked = flags[PROVIDER] or flags[BASE_URL]
    if path is None and recorded is not None and not provider_asked:
        path = recorded.header.gguf
    if path is None:
        return None
    if provider_asked:
        raise SettingsError(
            "--gguf serves the model with llama.cpp in this process: leave out --provider "
            "and --base-url"
        )
    return GgufSpec(Path(path).expanduser(), *_local_sizes(flags))


def _local_sizes(flags: Values) -> tuple[int, int | None]:
    """A local model's context size and threads, as the flags ask."""
    return flags[CONTEXT_SIZE] or DEFAULT_CONTEXT_SIZE, flags[THREADS]


def local_model(
    flags: Values,
    config: Values,
    environ: Mapping[str, str],
    recorded: Trajectory | None,
) -> LocalModel | None:
    """The model to run in this process, if any; None when a provider serves it.

    In order: an API key or a base URL (a provider: None), then a GGUF file (--gguf, or the
    resumed run's), then a Hub model named as `--model hf:OWNER/REPO/FILE.gguf`, then the
    default Hub model when nothing else is configured at all."""
    gguf = gguf_spec(flags, recorded)
    if gguf is not None:
        return gguf
    named = flags[MODEL] or (None if flags[PROVIDER] else config[MODEL])
    if named is not None and named.startswith(_HUB_SCHEME):
        if flags[PROVIDER] or flags[BASE_URL]:
            raise SettingsError(
                f"{named} runs with llama.cpp in this process: leave out --provider and --base-url"
            )
        try:
            file = HubFile.parse(named)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        return HubModelSpec(file, *_local_sizes(flags))
    if recorded is not None or _provider_configured(flags, config, environ):
        return None
    try:
        choice = default_for_this_machine(config[LOCAL_MODEL])
    except UnknownLocalModel as exc:
        raise SettingsError(f"{exc} (local_model in the config file)") from None
    return HubModelSpec(choice.option.file, *_local_sizes(flags), default=True, why=choice.why)


def _provider_configured(flags: Values, config: Values, environ: Mapping[str, str]) -> bool:
    """Whether the flags, the config file or the environment name a provider, a server or
    a key: then the default local model is not what the user meant."""
    if flags[PROVIDER] or config[PROVIDER] or flags[BASE_URL] or config[BASE_URL]:
        return True
    if flags[MODEL] or config[MODEL]:  # a model by name (not hf:) is a provider's
        return True
    key_env = config[API_KEY_ENV]
    if key_env and environ.get(key_env):
        return True
    return any(
        environ.get(kind.api_key_env) or environ.get(kind.base_url_env)
        for kind in PROVIDER_KINDS.values()
    )


@dataclass(frozen=True)
class ModelChoice:
    """The model a run uses: a local one to run in this process, or a provider's with its
    model filled in from what the server lists (`note`: what that listing told the user)."""

    local: LocalModel | None
    provider: ProviderChoice | None
    note: str | None = None


def choose_model(
    flags: Values, config: Values, environ: Mapping[str, str], recorded: Trajectory | None
) -> ModelChoice:
    """`local_model`, else the provider `choose_provider_for` names, its model resolved."""
    local = local_model(flags, config, environ, recorded)
    if local is not None:
        return ModelChoice(local, None)
    provider, note = resolve_model_sync(choose_provider_for(flags, config, environ, recorded))
    return ModelChoice(None, provider, note)
