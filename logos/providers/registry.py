"""The provider kinds a front end can choose by name, each with its settings and factory.

A front end (the `logos` command, a server) reads only this registry: the names it offers,
the environment variables it looks at, the defaults it fills in and how it builds the
provider. A new provider is a module of its own plus one entry in `PROVIDER_KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Protocol

from pydantic import AfterValidator

from logos.providers.anthropic import AnthropicProvider
from logos.providers.base import Provider
from logos.providers.http_provider import HTTPProvider
from logos.providers.openai import OpenAIProvider
from logos.providers.retry import RetryPolicy


class ProviderFactory(Protocol):
    """Builds a provider from the settings a front end resolved (a provider's constructor)."""

    def __call__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        context_window: int | None,
        retry: RetryPolicy | None,
    ) -> Provider: ...


@dataclass(frozen=True)
class ProviderKind:
    """One API a front end can talk to."""

    name: str
    """What `--provider`, the config file and trajectories call it."""
    label: str
    """Whose API it is, for messages ("your Anthropic API key")."""
    api_key_env: str
    """The environment variable holding the API key."""
    base_url_env: str
    """The environment variable that moves the API to another server."""
    default_model: str
    default_base_url: str
    factory: ProviderFactory
    lists_models: bool
    """Servers of this kind list their models (GET /models), so a local server's model
    need not be named."""


def _http_kind(provider: type[HTTPProvider], *, label: str, lists_models: bool) -> ProviderKind:
    """The kind of an HTTP provider: its name and settings as its wire format states them."""
    wire = provider.wire
    return ProviderKind(
        name=provider.name,
        label=label,
        api_key_env=wire.api_key_env,
        base_url_env=wire.base_url_env,
        default_model=wire.default_model,
        default_base_url=wire.default_base_url,
        factory=provider,
        lists_models=lists_models,
    )


_ANTHROPIC = _http_kind(AnthropicProvider, label="Anthropic", lists_models=False)
_OPENAI = _http_kind(OpenAIProvider, label="OpenAI", lists_models=True)

PROVIDER_KINDS: Mapping[str, ProviderKind] = {kind.name: kind for kind in (_ANTHROPIC, _OPENAI)}
"""Every kind by name, in the order their environment variables are looked for."""

LOCAL_SERVER_KIND = _OPENAI
"""The API that llama.cpp, Ollama and vLLM speak: a base URL alone means this kind."""


def provider_kind(name: str) -> ProviderKind:
    """The kind called `name`; a ValueError lists the known names."""
    try:
        return PROVIDER_KINDS[name]
    except KeyError:
        known = ", ".join(PROVIDER_KINDS)
        raise ValueError(f"unknown provider {name!r}: choose one of {known}") from None


ProviderName = Annotated[str, AfterValidator(lambda name: provider_kind(name).name)]
"""A provider kind's name in a validated record (a config file, a trajectory)."""
