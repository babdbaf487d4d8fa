"""The "only allowed" import contract (tools/import_contracts.py) on real packages written to
disk and read by grimp, as lint-imports reads the repository."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter import ContractCheck

from tools.import_contracts import OnlyAllowedContract, Violation

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
