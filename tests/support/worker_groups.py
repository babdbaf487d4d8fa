"""Which tests may run side by side when pytest-xdist spreads the suite over processes
(`pytest -n N`; the pytest config sets `--dist loadgroup`).

Each test gets an `xdist_group` from the rules below, never by hand, so a new test falls in
the right group by what it uses:

- a test that starts a Ray cluster runs where every other Ray test runs, one at a time: a
  node takes Ray's fixed default ports beside the one it is given;
- a test on the shared llama.cpp server (the session fixture `llama_server`) runs where the
  others on it run: one server for them all;
- a benchmark smoke test on the engine runs where the others do: the benchmark labels every
  container it starts `logos-bench`, and each of these tests counts them;
- a test that uses a fixture shared by its module (a daemon, a served app) runs where the
  rest of its module runs, so that fixture starts once;
- any other test runs wherever a worker is free.

Groups whose tests are slow go first, so that the run does not end waiting on one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

SHARED_SCOPES = frozenset({"module", "class", "package"})


@dataclass(frozen=True)
class Group:
    name: str
    takes: Callable[[pytest.Item], bool]
    first: bool
    """Scheduled before the others: its tests are long, and it runs on one worker."""


def _marked(*names: str) -> Callable[[pytest.Item], bool]:
    def takes(item: pytest.Item) -> bool:
        return any(item.get_closest_marker(name) is not None for name in names)

    return takes


def _uses(fixture: str) -> Callable[[pytest.Item], bool]:
    def takes(item: pytest.Item) -> bool:
        return fixture in getattr(item, "fixturenames", ())

    return takes


def _benchmark_on_the_engine(item: pytest.Item) -> bool:
    return item.path.parent.name == "bench" and item.get_closest_marker("docker") is not None


GROUPS = (
    Group("ray", _marked("ray"), first=True),
    Group("llama-server", _uses("llama_server"), first=True),
    Group("bench-engine", _benchmark_on_the_engine, first=True),
)


def group_of(item: pytest.Item) -> str | None:
    """The xdist group `item` runs in, None for wherever a worker is free."""
    for group in GROUPS:
        if group.takes(item):
            return group.name
    if isinstance(item, pytest.Function):
        for definitions in item._fixtureinfo.name2fixturedefs.values():
            if any(definition.scope in SHARED_SCOPES for definition in definitions):
                return item.nodeid.split("::")[0]
    return None


def _slow_first(item: pytest.Item) -> int:
    group = group_of(item)
    if any(group == first.name for first in GROUPS if first.first):
        return 0
    return 1 if item.get_closest_marker("slow") is not None else 2


def assign_groups(items: list[pytest.Item]) -> None:
    """Give each test its group (after the real-part marks: the rules read them, and before
    xdist reads the groups), and put the long groups and slow tests first (the order is
    otherwise kept: sort is stable)."""
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_slow_first)
