"""Which real parts each test uses (the Docker engine, llama.cpp, headless chromium, an MCP
client, Ray), read from what it reaches: its markers, the fixtures it asks for, and the
functions and classes of the tests and the benchmark that its code names, followed through.

Each test is marked with the parts it uses (`-m "not docker"` and the quick loop select on
them), and `pytest --collect-only -q --real-parts` counts them: a change that makes the suite
faster shows, by the same count before and after, that it dropped no real part.

WHY read from the code rather than from markers written by hand: a new test that starts a
browser through a helper is counted (and kept out of the quick loop) without anyone
remembering to mark it, and the same count can be taken on an older checkout.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLLOWED = (REPO / "tests", REPO / "bench")
"""Code followed into, besides the collected test modules: the tests' helpers, and the
benchmark (the smoke tests run it)."""


@dataclass(frozen=True)
class Part:
    """A real part: the marker it gives a test, and what reaching it looks like."""

    marker: str
    description: str
    markers: frozenset[str]
    fixtures: frozenset[str]
    objects: tuple[str, ...]
    """Dotted names of the functions and classes that start or drive it."""


PARTS = (
    Part(
        "docker",
        "the Docker engine",
        frozenset({"docker"}),
        frozenset({"docker_client"}),
        (
            "docker.from_env",
            "docker.DockerClient",
            "sandboxd.docker.backend.DockerBackend",
            "bench.daemon.docker_client",
        ),
    ),
    Part(
        "llama",
        "llama.cpp (xllamacpp) with a real model",
        frozenset({"llama"}),
        frozenset({"llama_server", "gguf", "xllamacpp_installed"}),
        (
            "logos.models.llama_server.LocalModelServer",
            "tests.support.llama.find_test_gguf",
            "tests.support.llama.find_default_gguf",
        ),
    ),
    Part(
        "browser",
        "headless chromium",
        frozenset(),
        frozenset({"browser"}),
        ("tests.support.browser.headless_chromium",),
    ),
    Part(
        "mcp",
        "an MCP client (the SDK's or the Inspector)",
        frozenset(),
        frozenset(),
        (
            "mcp.Client",
            "mcp.ClientSession",
            "mcp.client.stdio.stdio_client",
            "mcp.client.streamable_http.streamable_http_client",
            "tests.support.mcp_servers.inspector",
        ),
    ),
    Part(
        "ray",
        "a Ray cluster",
        frozenset(),
        frozenset(),
        ("bench.ray_cluster.ray_cluster", "bench.ray_cluster.ray_command"),
    ),
)


def _resolve(dotted: str) -> object | None:
    """The object a dotted name stands for; None when its package is not installed."""
    module_name, _, attribute = dotted.rpartition(".")
    try:
        found: object = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError):
        return None
    return found


class Reach:
    """What a piece of code reaches: the objects its names stand for, through every function
    and class of the followed packages it names (memoised: the suite shares its helpers)."""

    def __init__(self, test_modules: set[str]) -> None:
        self._seen: dict[int, frozenset[int]] = {}
        self._test_modules = test_modules

    def of(self, function: Callable[..., Any]) -> frozenset[int]:
        """The ids of every object `function` reaches."""
        function = inspect.unwrap(function)
        key = id(function)
        if key not in self._seen:
            self._seen[key] = frozenset()  # WHY first: recursion between helpers ends here
            reached: set[int] = set()
            for found in self._named(function):
                reached.add(id(found))
                for inner in self._followed(found, self._test_modules):
                    reached |= self.of(inner)
            self._seen[key] = frozenset(reached)
        return self._seen[key]

    @staticmethod
    def _named(function: Callable[..., Any]) -> Iterator[object]:
        code = getattr(function, "__code__", None)
        namespace = getattr(function, "__globals__", {})
        if code is None:
            return
        names = set(_names(code))
        for name in names:
            found = namespace.get(name)
            if found is None:
                continue
            yield found
            if isinstance(found, types.ModuleType):  # `mcp.Client`: a module's attribute
                for attribute in names:
                    if (inner := getattr(found, attribute, None)) is not None:
                        yield inner

    @staticmethod
    def _followed(found: object, test_modules: set[str]) -> Iterator[Callable[..., Any]]:
        module = getattr(found, "__module__", None) or ""
        if module not in test_modules and not _is_followed(module):
            return
        if inspect.isclass(found):
            for member in vars(found).values():
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    yield member
        elif inspect.isfunction(found):
            yield found


@functools.cache
def _is_followed(module_name: str) -> bool:
    source = getattr(sys.modules.get(module_name), "__file__", None)
    return source is not None and any(
        Path(source).resolve().is_relative_to(folder) for folder in FOLLOWED
    )


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _names(constant)


def parts_of(item: pytest.Item, reach: Reach, signatures: dict[str, frozenset[int]]) -> list[Part]:
    """The real parts `item` uses."""
    markers = _marker_names(item)
    fixtures = set(getattr(item, "fixturenames", ()))
    reached: set[int] = set()
    if isinstance(item, pytest.Function):
        reached |= reach.of(item.obj)
        for definitions in item._fixtureinfo.name2fixturedefs.values():
            for definition in definitions:
                reached |= reach.of(definition.func)
    return [
        part
        for part in PARTS
        if markers & part.markers or fixtures & part.fixtures or reached & signatures[part.marker]
    ]


def _marker_names(item: pytest.Item) -> set[str]:
    return {mark.name for mark in item.iter_markers()}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-parts",
        action="store_true",
        help="after collection, print how many of the selected tests use each real part "
        "(use with --collect-only, without -n)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for part in PARTS:
        config.addinivalue_line("markers", f"{part.marker}: uses {part.description}")


def mark_real_parts(items: list[pytest.Item]) -> None:
    """Mark each test with the parts it uses (before `-m` selects on these marks)."""
    reach = Reach({item.module.__name__ for item in items if isinstance(item, pytest.Function)})
    signatures = {
        part.marker: frozenset(
            id(found) for found in map(_resolve, part.objects) if found is not None
        )
        for part in PARTS
    }
    for item in items:
        marked = _marker_names(item)
        for part in parts_of(item, reach, signatures):
            if part.marker not in marked:
                item.add_marker(part.marker)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.config.getoption("real_parts"):
        return
    counts = Counter(name for item in session.items for name in _marker_names(item))
    lines = [f"real parts used by the {len(session.items)} selected tests:"]
    lines += [f"  {part.marker:<7} {counts[part.marker]:>5}  {part.description}" for part in PARTS]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\n".join(lines))
