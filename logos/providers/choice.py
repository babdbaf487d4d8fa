"""A provider as the settings chose it (`ProviderChoice`), its model filled in from what the
server lists when none was named (`resolve_model`), and the provider built from it."""

from __future__ import annotations

from dataclasses import dataclass, replace

import anyio

from logos.errors import SettingsError
from logos.providers.base import Provider
from logos.providers.listing import is_llama_cpp, is_loopback_url, list_models
from logos.providers.registry import ProviderKind
from logos.providers.retry import RetryPolicy

_MODELS_SHOWN = 10
"""Models a refusal to pick one for the user names, at most."""


@dataclass(frozen=True)
class ProviderChoice:
    """A resolved provider; `model` is None until `resolve_model` asks the server."""

    kind: ProviderKind
    model: str | None
    base_url: str
    api_key: str | None
    api_key_env: str
    llama_cpp: bool = False
    """The server is llama.cpp's own (found by `resolve_model`): it takes a grammar, and
    small-model defaults apply (`logos.agent.replies`)."""

    @property
    def uses_default_server(self) -> bool:
        return self.base_url.rstrip("/") == self.kind.default_base_url.rstrip("/")


async def resolve_model(choice: ProviderChoice) -> tuple[ProviderChoice, str | None]:
    """Fill in the model (the provider's default, or the first one a local server serves)
    and whether the server is llama.cpp's, which its model list says.

    Returns the choice and a note for the user when the model was picked for them;
    SettingsError when there is none to pick, or more than one a remote server bills for.
    """
    if not choice.kind.lists_models or choice.uses_default_server:
        return replace(choice, model=choice.model or choice.kind.default_model), None
    if choice.model is not None:
        # WHY tolerate a failure here: the model is named, so the list only tells which
        # server this is; a server without one is simply not llama.cpp.
        try:
            listed = await list_models(choice.base_url, choice.api_key)
        except SettingsError:
            return choice, None
        return replace(choice, llama_cpp=is_llama_cpp(listed)), None
    listed = await list_models(choice.base_url, choice.api_key)
    choice = replace(choice, llama_cpp=is_llama_cpp(listed))
    models = [entry.id for entry in listed]
    if len(models) > 1 and choice.api_key is not None and not is_loopback_url(choice.base_url):
        shown = ", ".join(models[:_MODELS_SHOWN])
        raise SettingsError(
            f"{choice.base_url} serves {len(models)} models ({shown}, …): choose one with --model"
        )
    note = None
    if len(models) > 1:
        note = (
            f"using {models[0]!r}, the first of the {len(models)} models {choice.base_url} "
            "serves (choose another with --model)"
        )
    return replace(choice, model=models[0]), note


def resolve_model_sync(choice: ProviderChoice) -> tuple[ProviderChoice, str | None]:
    """`resolve_model` for a caller outside any event loop (a command resolving its
    settings before it starts one)."""
    return anyio.run(resolve_model, choice)


def make_provider(
    choice: ProviderChoice,
    *,
    context_window: int | None = None,
    retry: RetryPolicy | None = None,
) -> Provider:
    if choice.model is None:
        raise ValueError("resolve_model() first: the provider needs a model")
    # WHY "" rather than None: None would make the provider read its default key variable,
    # which bypasses `api_key_env`; the key was resolved here already.
    return choice.kind.factory(
        model=choice.model,
        base_url=choice.base_url,
        api_key=choice.api_key or "",
        context_window=context_window,
        retry=retry,
    )
