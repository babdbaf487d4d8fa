"""Which tests may run side by side when pytest-xdist spreads the suite over processes
(`pytest -n N`; the pytest config sets `--dist loadgroup`), and in what order.

Each test gets an `xdist_group` from the rules below, never by hand, so a new test falls in
the right group by what it uses:

- a test that starts a Ray cluster runs where every other Ray test runs, one at a time: a
  node takes Ray's fixed default ports beside the one it is given;
- a test that starts a server on its documented default port (marked `default_port`: the
  docs' pages that run `logos serve` as a reader would) runs where the others that do run;
- a test on the shared llama.cpp server (the session fixture `llama_server`) runs where the
  others on it run: one server for them all;
- a test that uses a fixture shared by its module (a daemon, a served app) runs where the
  rest of its module runs, so that fixture starts once;
- any other test runs wherever a worker is free.

Tests that count containers or processes count only their own (their daemon's, their
marker's), so nothing else needs a group. The long tests go first and the quick ones last,
where they fill the gaps: the two groups above, then the tests slow on purpose, then those
on a real part, then the rest (the pytest config keeps xdist from reordering them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

SHARED_SCOPES = frozenset({"module", "class", "package"})
REAL_PARTS = ("docker", "llama", "browser", "mcp", "ray")


@dataclass(frozen=True)
class Group:
    name: str
    takes: Callable[[pytest.Item], bool]


def _marked(name: str) -> Callable[[pytest.Item], bool]:
    def takes(item: pytest.Item) -> bool:
        return item.get_closest_marker(name) is not None

    return takes


def _uses(fixture: str) -> Callable[[pytest.Item], bool]:
    def takes(item: pytest.Item) -> bool:
        return fixture in getattr(item, "fixturenames", ())

    return takes


GROUPS = (
    Group("ray", _marked("ray")),
    Group("llama-server", _uses("llama_server")),
    Group("default-port", _marked("default_port")),
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


def _turn(item: pytest.Item) -> int:
    """0 for the first tests to start, 3 for the last."""
    if any(group.takes(item) for group in GROUPS):
        return 0
    if item.get_closest_marker("slow") is not None:
        return 1
    if any(item.get_closest_marker(part) is not None for part in REAL_PARTS):
        return 2
    return 3


def assign_groups(items: list[pytest.Item]) -> None:
    """Give each test its group (after the real-part marks: the rules read them, and before
    xdist reads the groups), and sort the tests by their turn (the order within a turn is
    kept: sort is stable)."""
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_turn)
