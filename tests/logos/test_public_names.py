"""The `logos` package's public names: each one loads on first use, is the object its home
module holds, is known to type checkers, and importing one part of logos loads no other."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import logos

INIT = Path(logos.__file__)


def _loaded_after(statement: str) -> set[str]:
    """The logos modules a fresh interpreter holds after running `statement`."""
    probe = (
        f"import sys\n{statement}\nprint(' '.join(m for m in sys.modules if m.startswith('logos')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(done.stdout.split())


def test_every_public_name_is_its_home_modules_object() -> None:
    homes = logos._HOMES
    assert sorted(logos.__all__) == sorted(homes)
    for name, home in homes.items():
        assert getattr(logos, name) is getattr(importlib.import_module(home), name), name
    assert set(logos.__all__) <= set(dir(logos))


def test_type_checkers_see_the_same_names_from_the_same_modules() -> None:
    tree = ast.parse(INIT.read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If))
    seen = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name  # `name as name`: re-exported
    }
    assert seen == logos._HOMES


def test_a_name_logos_does_not_have_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Runnr'"):
        _ = logos.Runnr  # type: ignore[attr-defined]


def test_importing_one_part_loads_only_what_that_part_needs() -> None:
    # sandboxd and the runners import logos.options and logos.result: none of them may pay
    # for the agent loop, the providers or the models.
    loaded = _loaded_after("import logos.options, logos.result")
    assert not {
        m for m in loaded if m.startswith(("logos.agent", "logos.providers", "logos.models"))
    }
    assert "logos.agent.loop" in _loaded_after("from logos import run")
