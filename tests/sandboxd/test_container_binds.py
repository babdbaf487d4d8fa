"""The binds a sandbox container is created with (sandboxd.docker.container.bind_mounts)."""

from __future__ import annotations

from pathlib import Path

from sandboxd.backend import Mount, SandboxSpec
from sandboxd.docker.container import CONTROL_DIR, bind_mounts, plan_layout


def test_binds_ask_for_recursive_read_only_where_the_engine_has_it(tmp_path: Path) -> None:
    """Older engines ignore an option they do not know, so it goes only to those that do."""
    readable, writable = tmp_path / "readable", tmp_path / "writable"
    readable.mkdir()
    writable.mkdir()
    mounts = (Mount.of(str(readable), read_only=True), Mount.of(str(writable), read_only=False))
    spec = SandboxSpec("img:1", mounts, False, 1000, 1000)
    layout = plan_layout(spec)
    for version, recursive in (("1.41", False), ("1.43", False), ("1.44", True), ("1.50", True)):
        binds = bind_mounts(spec, layout, str(tmp_path), api_version=version)
        seen = {b["Target"]: (b["ReadOnly"], b.get("BindOptions")) for b in binds}
        wanted = {"ReadOnlyForceRecursive": True} if recursive else None
        assert seen == {
            CONTROL_DIR: (True, wanted),
            str(readable): (True, wanted),
            str(writable): (False, None),
            "/etc/hosts": (True, wanted),
        }, version
