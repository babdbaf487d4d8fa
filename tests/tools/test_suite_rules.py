"""The suite's own rules, on a small suite collected by real pytest (pytester): each test is
marked with the real parts it reaches, grouped for pytest-xdist by what it shares, and its
timeout stretched by its share of a CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.timeouts import cpu_share

CONFTEST = """
import pytest
from tests.support.real_parts import mark_real_parts
from tests.support.timeouts import stretch_timeouts
from tests.support.worker_groups import assign_groups

pytest_plugins = ["tests.support.real_parts"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_real_parts(items)
    assign_groups(items)
    stretch_timeouts(config, items)


@pytest.fixture(scope="session")
def docker_client():
    return None


@pytest.fixture(scope="module")
def daemon(docker_client):
    return None


@pytest.fixture(scope="session")
def llama_server():
    return None
"""

SUITE = """
import pytest
from mcp import Client
from tests.support.browser import headless_chromium
from tests.support.ray_cluster import ray_cluster


def opens_a_page():
    with headless_chromium():
        pass


def asks_the_engine(docker_client):
    pass


def test_plain():
    pass


def test_through_a_helper():
    opens_a_page()


def test_on_a_cluster():
    with ray_cluster():
        pass


async def test_with_an_mcp_client():
    async with Client("server"):
        pass


def test_on_the_shared_daemon(daemon):
    pass


def test_on_the_shared_model(llama_server):
    pass


@pytest.mark.docker
@pytest.mark.timeout(30)
def test_marked_by_hand():
    pass


@pytest.mark.slow
def test_slow_on_purpose():
    pass
"""


def collect(pytester: pytest.Pytester) -> dict[str, pytest.Item]:
    """The small suite's tests, by name, as a whole collection leaves them (in its order)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    _, recorded = pytester.inline_genitems()
    items = recorded.getcall("pytest_collection_modifyitems").items
    return {item.name: item for item in items}


@pytest.fixture
def collected(pytester: pytest.Pytester) -> dict[str, pytest.Item]:
    return collect(pytester)


def parts(item: pytest.Item) -> set[str]:
    known = {"docker", "llama", "browser", "mcp", "ray"}
    return {mark.name for mark in item.iter_markers()} & known


def group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    return None if marker is None else str(marker.args[0])


def test_each_test_is_marked_with_the_real_parts_it_reaches(
    collected: dict[str, pytest.Item],
) -> None:
    assert {name: parts(item) for name, item in collected.items()} == {
        "test_plain": set(),
        "test_through_a_helper": {"browser"},
        "test_on_a_cluster": {"ray"},
        "test_with_an_mcp_client": {"mcp"},
        "test_on_the_shared_daemon": {"docker"},
        "test_on_the_shared_model": {"llama"},
        "test_marked_by_hand": {"docker"},
        "test_slow_on_purpose": set(),
    }


def test_what_must_not_race_shares_a_group_and_the_rest_goes_anywhere(
    collected: dict[str, pytest.Item],
) -> None:
    assert {name: group(item) for name, item in collected.items()} == {
        "test_plain": None,
        "test_through_a_helper": None,
        "test_on_a_cluster": "ray",
        "test_with_an_mcp_client": None,
        "test_on_the_shared_daemon": "test_suite.py",
        "test_on_the_shared_model": "llama-server",
        "test_marked_by_hand": None,
        "test_slow_on_purpose": None,
    }


def test_the_long_tests_go_first_and_the_quick_ones_last(
    collected: dict[str, pytest.Item],
) -> None:
    assert list(collected) == [
        "test_on_a_cluster",
        "test_on_the_shared_model",
        "test_slow_on_purpose",
        "test_through_a_helper",
        "test_with_an_mcp_client",
        "test_on_the_shared_daemon",
        "test_marked_by_hand",
        "test_plain",
    ]


def test_a_share_of_a_cpu_counts_workers_over_cpus_and_never_less_than_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpus = os.cpu_count() or 1
    for workers, share in ((1, 1.0), (cpus, 1.0), (3 * cpus, 3.0)):
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
        assert cpu_share() == share
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert cpu_share() == 1.0


def test_a_timeout_is_stretched_by_the_workers_share_of_a_cpu(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(4 * (os.cpu_count() or 1)))
    pytester.makeini("[pytest]\ntimeout = 100\n")
    items = collect(pytester)

    def timeout(name: str) -> float:
        marker = items[name].get_closest_marker("timeout")
        assert marker is not None, name
        return float(marker.args[0])

    assert timeout("test_plain") == 400
    assert timeout("test_marked_by_hand") == 120


def test_the_programs_a_test_starts_can_be_stopped_with_ctrl_c() -> None:
    """However the suite was started (a background job of a script ignores SIGINT)."""
    child = subprocess.run(
        [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT).__name__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout == "default_int_handler\n"
