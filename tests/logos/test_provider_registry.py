"""The provider registry: every kind builds its provider from what a front end resolved."""

from __future__ import annotations

import pytest

from logos.providers import RetryPolicy
from logos.providers.registry import LOCAL_SERVER_KIND, PROVIDER_KINDS, provider_kind

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", list(PROVIDER_KINDS))
async def test_each_kind_builds_its_provider_by_keyword(name: str) -> None:
    kind = provider_kind(name)
    retry = RetryPolicy(max_attempts=1)
    provider = kind.factory(
        model=kind.default_model,
        base_url="http://127.0.0.1:9/api",
        api_key="",
        context_window=1234,
        retry=retry,
    )
    try:
        assert provider.name == kind.name
        assert (provider.model, provider.context_window) == (kind.default_model, 1234)
    finally:
        await provider.aclose()
    assert kind.default_base_url.startswith("https://")
    assert kind.api_key_env != kind.base_url_env


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown provider 'gemini': choose one of anthropic, openai"
    ):
        provider_kind("gemini")


def test_a_bare_base_url_means_a_kind_whose_servers_list_their_models() -> None:
    assert LOCAL_SERVER_KIND is PROVIDER_KINDS[LOCAL_SERVER_KIND.name]
    assert LOCAL_SERVER_KIND.lists_models
