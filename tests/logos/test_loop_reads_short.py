"""The loop and the protocol read a function at a time: none is longer than a screen."""

from __future__ import annotations

import ast
from pathlib import Path

import logos

SCREEN = 60
"""Lines, from `def` to the function's last line."""
PACKAGES = ("agent", "protocol")


def test_no_function_of_the_loop_or_the_protocol_is_longer_than_a_screen() -> None:
    root = Path(logos.__file__).parent
    too_long = []
    for package in PACKAGES:
        for module in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > SCREEN:
                        too_long.append(f"{module.relative_to(root)}:{node.name} ({lines})")
    assert too_long == []
