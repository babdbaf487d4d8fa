"""The model a command talks to: a provider, or a local GGUF served while the command runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from logos.cli.errors import CliError
from logos.cli.settings import GgufSpec, ProviderChoice, make_provider
from logos.errors import LocalModelError
from logos.local_model import LocalModelServer
from logos.providers import OpenAIProvider, Provider, RetryPolicy


@dataclass(frozen=True)
class OpenModel:
    """A ready provider and what a trajectory records about it (`provider.name` is its kind
    in the provider registry)."""

    provider: Provider
    model: str
    base_url: str | None
    """None for a local GGUF: its server lives only as long as this command."""
    gguf: str | None


@contextmanager
def open_model(
    choice: ProviderChoice | None, gguf: GgufSpec | None, retry: RetryPolicy | None = None
) -> Iterator[OpenModel]:
    """The provider for `choice`, or llama.cpp serving `gguf` (stopped on the way out, also
    on an error or Ctrl-C). The caller closes the provider (`await provider.aclose()`)."""
    if gguf is None:
        if choice is None or choice.model is None:
            raise ValueError("open_model needs a resolved ProviderChoice or a GgufSpec")
        provider = make_provider(choice, retry=retry)
        yield OpenModel(provider, choice.model, choice.base_url, None)
        return
    local = LocalModelServer(gguf.path, n_ctx=gguf.context_size, threads=gguf.threads)
    try:
        local.start()
    except (LocalModelError, ValueError) as exc:
        raise CliError(str(exc)) from None
    try:
        provider = OpenAIProvider(
            model=local.model_name,
            base_url=local.openai_base_url,
            api_key=local.api_key,
            context_window=local.n_ctx,
            retry=retry,
        )
        yield OpenModel(provider, local.model_name, None, str(gguf.path))
    finally:
        local.stop()
