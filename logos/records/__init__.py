"""What a run writes down: its typed events (`events`: `--json` lines, a server's stream) and
its trajectory (`trajectory`: JSON lines written as it happens, read back to resume).

Imports the agent's steps, the approvals' decisions and the shared vocabulary; no front.
"""
