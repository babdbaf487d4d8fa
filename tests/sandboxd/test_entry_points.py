"""sandboxd's public entry points, loaded as their users load them: through the installed
package's metadata, by group and name, wherever the modules behind them live."""

from __future__ import annotations

from importlib.metadata import entry_points

from sandboxd.cli import main
from sandboxd.client.kind import SANDBOXD


def test_the_sandboxes_entry_point_of_logos_loads_sandboxds_kind() -> None:
    (entry,) = entry_points(group="logos.sandboxes", name="sandboxd")
    assert entry.value == "sandboxd.client.kind:SANDBOXD"
    assert entry.load() is SANDBOXD


def test_the_sandboxd_command_runs_the_cli() -> None:
    (entry,) = entry_points(group="console_scripts", name="sandboxd")
    assert entry.value == "sandboxd.cli:main"
    assert entry.load() is main
