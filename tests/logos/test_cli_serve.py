"""`logos serve` without its optional extra says how to install it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_harness import logos, make_home


@pytest.mark.timeout(60)
def test_serve_without_starlette_says_how_to_install_it(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    missing = tmp_path / "missing"
    missing.mkdir()
    # WHY a module that fails to import: it stands for Starlette not being installed.
    (missing / "starlette.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'starlette'\", name='starlette')\n"
    )
    env = home.env()
    env["PYTHONPATH"] = f"{missing}:{env['PYTHONPATH']}"
    done = logos(["serve", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], home, env)
    assert done.returncode == 2
    assert "pip install 'logos[serve]'" in done.stderr
    assert "Traceback" not in done.stderr
