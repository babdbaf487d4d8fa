"""The import contracts: the contract types of tools/import_contracts.py on small packages
written to disk and read by grimp, and each of sandboxd's contracts in pyproject.toml broken
by one wrong import in a copy of the real tree, checked by the real `lint-imports`."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import grimp
import pytest
from importlinter import ContractCheck

import sandboxd.inside
from sandboxd.docker.container import STAGED_MODULES
from sandboxd.inside import copier
from tools.import_contracts import OnlyAllowedContract, StandardLibraryOnlyContract, Violation

LIB = {
    "lib/__init__.py": "from lib import engine\n",
    "lib/words.py": "WORD = 'w'\n",
    "lib/numbers.py": "from lib.words import WORD\nN = len(WORD)\n",
    "lib/engine.py": "from lib.numbers import N\n",
    "daemon/__init__.py": "",
}


def _check(root: Path, monkeypatch: pytest.MonkeyPatch, **files: str) -> ContractCheck:
    """The contract "daemon imports only lib.words and lib.numbers" on LIB with `files`
    (dotted module names) added or replaced."""
    for name, text in {**LIB, **{f"{k.replace('.', '/')}.py": v for k, v in files.items()}}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.syspath_prepend(str(root))
    graph = grimp.build_graph("lib", "daemon", cache_dir=None)
    contract = OnlyAllowedContract(
        name="daemon imports only lib's vocabulary",
        session_options={},
        contract_options={
            "source_modules": ["daemon"],
            "target": "lib",
            "allowed_modules": ["lib.words", "lib.numbers"],
        },
    )
    return contract.check(graph, verbose=False)


def test_imports_of_allowed_modules_keep_the_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = "import json\nfrom lib.words import WORD\nimport lib.numbers\n"
    check = _check(tmp_path, monkeypatch, **{"daemon.server": server})
    assert check.kept and check.metadata["violations"] == []


def test_any_other_module_of_the_target_breaks_it_with_where_it_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = (
        "from lib.words import WORD\n\n\ndef f():\n    from lib.engine import N\n    import lib\n"
    )
    check = _check(
        tmp_path, monkeypatch, **{"daemon.deep.__init__": "", "daemon.deep.server": server}
    )
    assert not check.kept
    assert check.metadata["violations"] == [
        Violation("daemon.deep.server", "lib", (6,)),
        Violation("daemon.deep.server", "lib.engine", (5,)),
    ]
    assert check.metadata["violations"][1].describe() == "daemon.deep.server -> lib.engine (l.5)"


def test_an_allowed_module_may_not_widen_the_allowance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _check(
        tmp_path,
        monkeypatch,
        **{"lib.numbers": "from lib.engine import X\n", "lib.engine": "X = 1\n"},
    )
    assert check.metadata["violations"] == [Violation("lib.numbers", "lib.engine", (1,))]


def test_the_standard_library_only_contract_needs_the_external_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without them in the graph, an import of another package could not be seen: the
    contract refuses to pass for want of looking."""
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "__init__.py").write_text("import json\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    contract = StandardLibraryOnlyContract(
        name="inside imports only the standard library",
        session_options={},
        contract_options={"source_modules": ["inside"]},
    )
    with pytest.raises(ValueError, match="include_external_packages = true"):
        contract.check(grimp.build_graph("inside", cache_dir=None), verbose=False)


REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"
]
NAMES = {contract.get("id", contract["name"]): contract["name"] for contract in CONTRACTS}
"""Every contract's name, by its id (the contracts without one, by their name)."""


@pytest.fixture(scope="module")
def broken_contracts(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., set[str]]:
    """The ids of the contracts `lint-imports` finds broken in a copy of the repository's
    packages and pyproject.toml, with `lines` appended to the files they are keyed by."""
    cache = tmp_path_factory.mktemp("lint-imports-cache")

    def broken(**lines: str) -> set[str]:
        tree = tmp_path_factory.mktemp("tree")
        for package in ("logos", "sandboxd", "tools"):
            shutil.copytree(
                REPO / package, tree / package, ignore=shutil.ignore_patterns("__pycache__")
            )
        shutil.copy2(REPO / "pyproject.toml", tree)
        for module, line in lines.items():
            path = tree / f"{module.replace('.', '/')}.py"
            path.write_text(f"{path.read_text()}\n{line}\n")
        run = subprocess.run(
            [str(LINT_IMPORTS), "--no-logo", "--cache-dir", str(cache)],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=120,
        )
        report = " ".join(run.stdout.split())  # the report wraps long names
        found = {
            contract: verdict
            for contract, name in NAMES.items()
            for verdict in ("KEPT", "BROKEN")
            if f"{name} {verdict}" in report
        }
        assert found.keys() == NAMES.keys(), run.stdout + run.stderr
        failed = {contract for contract, verdict in found.items() if verdict == "BROKEN"}
        assert run.returncode == (1 if failed else 0), run.stdout + run.stderr
        return failed

    return broken


def test_the_repository_keeps_every_contract(broken_contracts: Callable[..., set[str]]) -> None:
    assert broken_contracts() == set()


@pytest.mark.parametrize(
    ("module", "line", "contracts"),
    [
        # Inside the container: another part of sandboxd, a package that is not the
        # standard library, and a staged logos module reaching for more of logos.
        ("sandboxd.inside.egress_forwarder", "import sandboxd.api", {"inside"}),
        ("sandboxd.inside.supervisor", "import pydantic", {"inside"}),
        ("logos.runners.live", "from logos.result import Result", {"inside"}),
        # The policy: the client side; the server's config closes a cycle as well.
        ("sandboxd.policy.mount_table", "import sandboxd.client.runner", {"policy"}),
        ("sandboxd.policy.pinned", "import sandboxd.server.config", {"policy", "acyclic"}),
        # The client side and the MCP server: server internals.
        ("sandboxd.client.kind", "from sandboxd.server.config import DaemonConfig", {"client"}),
        ("sandboxd.mcp.limits", "import sandboxd.policy.pinned", {"client"}),
        # A cycle inside a subpackage.
        ("sandboxd.sessions.pool", "import sandboxd.sessions.table", {"acyclic"}),
    ],
)
def test_one_wrong_import_breaks_exactly_its_contract(
    broken_contracts: Callable[..., set[str]], module: str, line: str, contracts: set[str]
) -> None:
    assert broken_contracts(**{module: line}) == contracts


def test_the_inside_contract_holds_what_the_containers_stage() -> None:
    """Every module of sandboxd.inside is staged into a container (the copier alone into a
    fork's copier container, as its one source file, so it imports nothing of ours), nothing
    else of sandboxd is, and what is staged with them is what the contract allows them."""
    (contract,) = [contract for contract in CONTRACTS if contract.get("id") == "inside"]
    inside = {
        f"sandboxd.inside.{module.name}"
        for module in pkgutil.iter_modules(sandboxd.inside.__path__)
    }
    staged = {module.__name__ for module in STAGED_MODULES} | {copier.__name__}
    assert staged == inside | set(contract["staged_modules"])
    imported = {
        name
        for line in Path(copier.__file__).read_text().splitlines()
        if line.startswith(("import ", "from "))
        for name in [line.split()[1].split(".")[0]]
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
