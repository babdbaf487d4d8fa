"""The daemon's client side: what a caller of the socket runs.

`connection` (the one client of the daemon's socket, and what a failure means), `runner`
(`SandboxRunner`, a logos runner through the daemon), `kind` (sandboxd as a logos sandbox
kind: the entry point `logos.sandboxes`) and `autostart` (a daemon started on demand).

It imports the wire models (sandboxd.api) and where the socket lives (sandboxd.paths),
never the server's internals (lint-imports checks it).
"""

__all__ = ["connection", "kind", "runner"]
