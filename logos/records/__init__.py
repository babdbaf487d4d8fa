"""What a run writes down: its typed events (`events`: `--json` lines, a server's stream),
its trajectory (`trajectory`: JSON lines written as it happens, read back to resume), and
the recorder that writes both for a front while the loop runs (`recorder`).

Imports the agent, the approvals' decisions and audit log, and the shared vocabulary; no front.
"""

__all__ = ["events", "recorder", "trajectory"]
