"""The one narrowing (`logos.options.narrowing`), as one table: each narrowable option asked
equal to its ceiling, narrower, wider, and of the wrong kind. Each front's refusal in these
words, through its real interface, is in test_narrowing_fronts.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from logos.ceiling import ceiling_of
from logos.options import AllowedPath
from logos.options.declarations import (
    ALLOW,
    ALLOW_HOST,
    MAX_COST,
    MAX_STEPS,
    MAX_TIME,
    MAX_TIMEOUT,
    MAX_TOKENS,
    MAX_TOTAL_TOKENS,
    NETWORK,
    OPTIONS,
    TIMEOUT,
)
from logos.options.narrowing import (
    RULE,
    Asked,
    Ceiling,
    NarrowingRefused,
    narrow,
    narrowed,
    sandbox_only,
)
from logos.options.option import Narrowing, Option, Place

RULE_HERE = RULE.format(owner="this server")


@dataclass(frozen=True)
class Places:
    root: Path
    """Granted read-write; holds `sub`."""
    read_only: Path
    """Granted read-only."""
    outside: Path


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Places]:
    base = tmp_path_factory.mktemp("narrowing")
    for name in ("root/sub", "ro", "outside"):
        (base / name).mkdir(parents=True)
    yield Places(base / "root", base / "ro", base / "outside")


def ceiling(places: Places, *, network: bool = False) -> Ceiling:
    granted = (AllowedPath(str(places.root), False), AllowedPath(str(places.read_only), True))
    widest: dict[Option[Any], object] = {
        MAX_STEPS: 10,
        MAX_COST: 2.0,
        MAX_TIME: 60.0,
        MAX_TOKENS: 1000,
        MAX_TOTAL_TOKENS: 5000,
        TIMEOUT: 60.0,
        NETWORK: network,
        ALLOW_HOST: ("pypi.org", "*.python.org"),
        ALLOW: None,
    }
    return Ceiling.of(
        "this server",
        (Place.CONFIG_FILE, Place.COMMAND_LINE),
        widest,
        defaults={ALLOW: granted},
        paths=ceiling_of(granted),
    )


def paths(*asked: tuple[str, bool]) -> list[AllowedPath]:
    return [AllowedPath(path, read_only) for path, read_only in asked]


# option, asked (a callable of the places), what the caller gets (or None: refused),
# and the refusal's words ("{...}" formatted with the places).
NUMBERS = [
    (MAX_STEPS, 10, 3, 11, "ten", "a whole number of at least 1"),
    (MAX_COST, 2.0, 0.5, 2.5, -1, "a positive number"),
    (MAX_TIME, 60.0, 1.5, 61, "soon", "a positive number"),
    (MAX_TOKENS, 1000, 10, 1001, 1.5, "a whole number of at least 1"),
    (MAX_TOTAL_TOKENS, 5000, 5, 5001, 0, "a whole number of at least 1"),
    (TIMEOUT, 60.0, 0.5, 90, float("inf"), "a positive number"),
]
CASES: list[tuple[str, Option[Any], Any, Any, str]] = []
for option, equal, narrower, wider, wrong, words in NUMBERS:
    widest = equal
    CASES += [
        ("equal", option, equal, equal, ""),
        ("narrower", option, narrower, narrower, ""),
        (
            "wider",
            option,
            wider,
            None,
            f"{option.name} {wider:g} is above this server's limit of {widest:g} ("
            f"{option.key} in its config file, or {option.flag_names[0]}): {RULE_HERE}; ask for "
            f"{widest:g} or less",
        ),
        ("wrong kind", option, wrong, None, f"{option.name} {wrong!r} is not {words}"),
    ]
CASES += [
    ("equal", NETWORK, False, False, ""),
    ("narrower", NETWORK, False, False, ""),
    (
        "wider",
        NETWORK,
        True,
        None,
        "network asks for network access to every host, which this server does not give "
        f"(--network): {RULE_HERE}; leave it out",
    ),
    ("wrong kind", NETWORK, "yes", None, "network 'yes' is not true or false"),
    ("equal", ALLOW_HOST, ["pypi.org", "*.python.org"], ("pypi.org", "*.python.org"), ""),
    ("narrower", ALLOW_HOST, ["Docs.Python.org"], ("Docs.Python.org",), ""),
    (
        "wider",
        ALLOW_HOST,
        ["pypi.org", "evil.example"],
        None,
        "allowed_hosts: host evil.example is not among this server's hosts (pypi.org, "
        f"*.python.org; --allow-host): {RULE_HERE}; ask for some of them",
    ),
    ("wrong kind", ALLOW_HOST, "pypi.org", None, "allowed_hosts 'pypi.org' is not a list of"),
    ("equal", ALLOW, [("{root}", False), ("{ro}", True)], "asked", ""),
    ("narrower", ALLOW, [("{root}/sub", True)], "asked", ""),
    (
        "wider",
        ALLOW,
        [("{outside}", True)],
        None,
        "refused {outside}: it is outside the paths granted to this caller "
        "({root} (read-write), {ro} (read-only)); a caller can narrow its paths, never widen",
    ),
    (
        "wider",
        ALLOW,
        [("{ro}", False)],
        None,
        "refused {ro} read-write: the paths granted to this caller hold it only "
        "read-only ({ro} (read-only))",
    ),
    ("wrong kind", ALLOW, [("relative/dir", True)], None, "must be an absolute host path"),
]


def _placed(value: Any, places: Places) -> Any:
    """`value` with {root}, {ro}, {outside} filled in (paths become AllowedPaths)."""
    where = {"root": places.root, "ro": places.read_only, "outside": places.outside}
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return paths(*((path.format(**where), read_only) for path, read_only in value))
    return value


@pytest.mark.parametrize(
    ("case", "option", "asked", "gets", "refusal"),
    CASES,
    ids=[f"{option.key}-{case}" for case, option, *_ in CASES],
)
def test_one_table_of_narrowing(
    places: Places, case: str, option: Option[Any], asked: Any, gets: Any, refusal: str
) -> None:
    value = _placed(asked, places)
    ask = Asked(option, option.name, value)
    if gets is not None:
        granted = narrowed(ceiling(places), [ask])
        if option is ALLOW:
            assert granted.paths == tuple(value)
        else:
            assert granted[option] == gets
        return
    with pytest.raises(NarrowingRefused) as refused:
        narrowed(ceiling(places), [ask])
    where = {"root": places.root, "ro": places.read_only, "outside": places.outside}
    assert refusal.format(**where) in str(refused.value)
    assert refused.value.wider is (case == "wider")


def test_the_table_covers_every_narrowable_option() -> None:
    narrowable = {option.key for option in OPTIONS if option.narrowing is not None}
    assert {option.key for _, option, *_ in CASES} == narrowable
    for kind in ("equal", "narrower", "wider", "wrong kind"):
        assert {option.key for case, option, *_ in CASES if case == kind} == narrowable


def test_what_is_not_asked_is_the_ceilings_default(places: Places) -> None:
    granted = narrowed(ceiling(places), [])
    assert granted[MAX_STEPS] == 10 and granted[MAX_COST] == 2.0 and granted[NETWORK] is False
    assert granted.hosts == ("pypi.org", "*.python.org")
    assert granted.paths == (
        AllowedPath(str(places.root), False),
        AllowedPath(str(places.read_only), True),
    )


def test_a_ceiling_that_sets_no_limit_takes_what_is_asked(places: Places) -> None:
    free = Ceiling.of("this server", (Place.CONFIG_FILE,), {MAX_COST: None, NETWORK: None})
    granted = narrowed(free, [Asked(MAX_COST, "max_cost_usd", 99.0), Asked(NETWORK, "n", True)])
    assert granted[MAX_COST] == 99.0 and granted[NETWORK] is True


def test_a_launch_option_can_bound_another_and_is_named(places: Places) -> None:
    launch = Ceiling.of(
        "this server",
        (Place.SANDBOXD_LAUNCH,),
        {TIMEOUT: 30.0},
        defaults={TIMEOUT: 10.0},
        set_by={TIMEOUT: MAX_TIMEOUT},
    )
    assert narrowed(launch, [])[TIMEOUT] == 10.0
    with pytest.raises(NarrowingRefused, match=r"\(max_timeout in its config file, or "):
        narrowed(launch, [Asked(TIMEOUT, "timeout_s", 31.0)])


def test_hosts_with_the_network_on_contradict_each_other(places: Places) -> None:
    both = [Asked(NETWORK, "runner.network", True), Asked(ALLOW_HOST, "runner.hosts", ["x.org"])]
    with pytest.raises(NarrowingRefused) as asked_both:
        narrowed(ceiling(places, network=True), both)
    assert str(asked_both.value) == (
        "runner.hosts limits a sandbox without network to those hosts, and runner.network "
        "opens every host: use one or the other"
    )
    assert asked_both.value.wider is False
    with pytest.raises(NarrowingRefused, match="sandboxes have the network on") as launched_on:
        narrowed(ceiling(places, network=True), both[1:])
    assert launched_on.value.wider is False
    # With the network on, a caller may turn it off and name any hosts: that narrows too.
    off = [Asked(NETWORK, "network", False), Asked(ALLOW_HOST, "hosts", ["x.org"])]
    assert narrowed(ceiling(places, network=True), off).hosts == ("x.org",)


def test_every_refusal_is_kept_for_a_grant_and_the_first_malformed_one_is_said_first(
    places: Places,
) -> None:
    asked = [
        Asked(ALLOW_HOST, "hosts", ["evil.example", "worse.example"]),
        Asked(MAX_STEPS, "max_steps", "many"),
    ]
    outcome = narrow(ceiling(places), asked)
    assert [refusal.wider for refusal in outcome.refusals] == [True, True, False]
    assert outcome.values.hosts == ("evil.example", "worse.example")
    with pytest.raises(NarrowingRefused, match="max_steps 'many' is not") as refused:
        narrowed(ceiling(places), asked)
    assert [refusal.wider for refusal in refused.value.refusals] == [False, True, True]
    assert refused.value.wider is False


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        (["network"], "network is for the sandbox"),
        (["network", "allowed_hosts"], "network and allowed_hosts are for the sandbox"),
        (
            ["allowed_paths", "network", "allowed_hosts"],
            "allowed_paths, network and allowed_hosts are for the sandbox",
        ),
    ],
)
def test_sandbox_options_for_local_commands_are_refused_in_one_wording(
    fields: list[str], said: str
) -> None:
    assert sandbox_only(fields, "runner.kind") == (
        f'{said} (runner.kind "sandbox"): local commands reach the whole machine'
    )


def test_every_narrowing_has_a_kind_of_its_own() -> None:
    used = {option.narrowing for option in OPTIONS if option.narrowing is not None}
    assert used == set(Narrowing)
