"""The real llama.cpp server for tests, started once per test session.

The model is SmolLM2-135M-Instruct (Q4_1): `scripts/fetch-model` puts it in .cache/models/;
`LOGOS_TEST_GGUF` points at another GGUF. Missing parts skip the tests locally and fail
them in CI (see `require`). The root conftest registers its fixture.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from logos.models.llama_server import LocalModelServer
from tests.support.parts import require

REPO = Path(__file__).resolve().parents[2]
CACHED_GGUF = REPO / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHED_DEFAULT_GGUF = REPO / ".cache" / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def find_test_gguf() -> Path | None:
    """The model the tests run on: `LOGOS_TEST_GGUF`, else the fetched one, else None."""
    configured = os.environ.get("LOGOS_TEST_GGUF")
    if configured:
        return Path(configured)
    return CACHED_GGUF if CACHED_GGUF.is_file() else None


def find_default_gguf() -> Path | None:
    """The default model's own file (`logos.models.hf_hub.DEFAULT_MODEL`, which a newcomer's first
    run fetches from the Hub), for the tests that play that first run: `LOGOS_DEFAULT_GGUF`, else
    the one `scripts/fetch-model qwen2.5-coder-0.5b` put in .cache/models/, else None."""
    configured = os.environ.get("LOGOS_DEFAULT_GGUF")
    if configured:
        return Path(configured)
    return CACHED_DEFAULT_GGUF if CACHED_DEFAULT_GGUF.is_file() else None


@pytest.fixture(scope="session")
def gguf() -> Path:
    """The test model's file; skips (fails in CI) a test that needs it when it is missing."""
    path = find_test_gguf()
    require(path is not None and path.is_file(), "no test model: run scripts/fetch-model")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def xllamacpp_installed() -> None:
    """Skips (fails in CI) a test that needs the xllamacpp package when it is missing."""
    require(
        importlib.util.find_spec("xllamacpp") is not None,
        "xllamacpp is not installed: pip install -e .",
    )


@pytest.fixture(scope="session")
def llama_server(xllamacpp_installed: None) -> Iterator[LocalModelServer]:
    """llama.cpp serving the test model on 127.0.0.1 with one thread (the machine is shared)."""
    gguf = find_test_gguf()
    require(
        gguf is not None and gguf.is_file(),
        f"no test model at {gguf or CACHED_GGUF}: run scripts/fetch-model or set LOGOS_TEST_GGUF",
    )
    assert gguf is not None
    with LocalModelServer(gguf, n_ctx=4096, threads=1) as server:
        yield server
