"""The model a command talks to: a provider, or a local GGUF served while the command runs
(a file, or a Hub model fetched into the cache first)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from logos.cli.errors import EXIT_INTERRUPTED, CliError
from logos.errors import LocalModelError
from logos.models.hub_file import HubError
from logos.models.llama_server import LocalModelServer
from logos.providers import OpenAIProvider, Provider, RetryPolicy
from logos.providers.choice import ProviderChoice, make_provider
from logos.settings.model_choice import GgufSpec, LocalModel


def local_gguf(
    model: LocalModel,
    *,
    ask: bool,
    plain: bool,
    environ: Mapping[str, str] = os.environ,
    stdin: TextIO | None = None,
    stderr: TextIO | None = None,
) -> GgufSpec:
    """The GGUF file to serve: as given, or the Hub model's, fetched into the cache unless
    it is there (progress on `stderr`: a bar on a terminal, two plain lines otherwise or
    when `plain`). `ask`: say the size and ask on the terminal before downloading.

    A fault is a CliError that says what to do; Ctrl-C says the next run resumes and exits
    130, the partial download kept for it."""
    if isinstance(model, GgufSpec):
        return model
    # WHY here: huggingface_hub's client and the progress bar cost every `logos` start a
    # tenth of a second, and only a Hub model needs them.
    from logos.cli.download_progress import ask_to_download, download_progress
    from logos.models.hf_hub import Hub

    stdin, stderr = stdin or sys.stdin, stderr or sys.stderr
    hub = Hub.from_environment(environ)
    try:
        path = hub.fetch(
            model.file,
            download_progress(stderr, environ, plain=plain),
            (lambda remote: ask_to_download(remote, hub.cache_dir, stdin, stderr)) if ask else None,
        )
    except HubError as exc:
        raise CliError(exc.message) from None
    except KeyboardInterrupt:
        raise CliError(
            f"the download of {model.file} was interrupted: run the same command again to "
            "resume it",
            EXIT_INTERRUPTED,
        ) from None
    return model.at(path)


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
