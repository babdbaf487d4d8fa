"""The models an OpenAI-compatible server serves, as it lists them at GET /models: which one
to use when none is named, and whether the server is llama.cpp's own."""

from __future__ import annotations

import httpx
from pydantic import BaseModel, ValidationError

from logos.access.names import is_loopback
from logos.errors import SettingsError
from logos.tls import tls_for, tls_problem

_LIST_TIMEOUT_S = 10.0


class ModelEntry(BaseModel):
    id: str
    owned_by: str | None = None
    """"llamacpp" from llama.cpp's server."""


class _ModelList(BaseModel):
    data: list[ModelEntry]


async def list_models(base_url: str, api_key: str | None) -> list[ModelEntry]:
    """The models the server at `base_url` lists; SettingsError says why there are none to
    choose from, and what to do."""
    url = f"{base_url}/models"
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        # WHY trust_env=False on loopback: a proxy from the environment must not carry it.
        async with httpx.AsyncClient(
            timeout=_LIST_TIMEOUT_S,
            trust_env=not is_loopback_url(base_url),
            verify=tls_for(base_url),
        ) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        problem = tls_problem(base_url, exc)
        if problem is not None:
            raise SettingsError(f"cannot ask {url} for its models: {problem}") from None
        raise SettingsError(
            f"cannot reach {url} to find out which model to use ({exc or type(exc).__name__}): "
            "is the server running at that address? Or name the model with --model"
        ) from None
    if response.status_code != 200:
        raise SettingsError(
            f"{url} answered HTTP {response.status_code} when asked for its models: name the "
            "model with --model"
        )
    try:
        listing = _ModelList.model_validate_json(response.content)
    except ValidationError:
        raise SettingsError(
            f"{url} did not answer with a model list: is --base-url the API root (e.g. "
            "http://127.0.0.1:8080/v1)? Or name the model with --model"
        ) from None
    if not listing.data:
        raise SettingsError(
            f"{url} lists no models: load one in the server, or name it with --model"
        )
    return listing.data


def is_llama_cpp(listed: list[ModelEntry]) -> bool:
    return any(entry.owned_by == "llamacpp" for entry in listed)


def is_loopback_url(url: str) -> bool:
    return is_loopback(httpx.URL(url).host)
