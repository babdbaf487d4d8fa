"""Where the `logos` command keeps its files: trajectories, the audit log, the memory notes
and the server's state.

They are written privately to the user by `logos.jsonl`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def state_dir(environ: Mapping[str, str]) -> Path:
    """`$XDG_STATE_HOME/logos`, else `~/.local/state/logos`."""
    state_home = environ.get("XDG_STATE_HOME")
    base = Path(state_home) if state_home else Path.home() / ".local" / "state"
    return base / "logos"


def audit_log_path(environ: Mapping[str, str]) -> Path:
    return state_dir(environ) / "audit.jsonl"


def runs_dir(environ: Mapping[str, str]) -> Path:
    return state_dir(environ) / "runs"


def memory_path(environ: Mapping[str, str]) -> Path:
    return state_dir(environ) / "memory.json"


def serve_dir(environ: Mapping[str, str]) -> Path:
    """`logos serve`'s token, sessions and run event logs."""
    return state_dir(environ) / "serve"
